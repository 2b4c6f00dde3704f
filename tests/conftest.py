import os, pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

def pytest_addoption(parser):
    parser.addoption("--slow", action="store_true", default=False, help="also run tests marked slow")

def pytest_collection_modifyitems(config, items):
    if config.getoption("--slow") or "slow" in (config.getoption("-m") or ""): return
    skip = pytest.mark.skip(reason="slow: run with `make test-slow`")
    for item in items:
        if "slow" in item.keywords: item.add_marker(skip)
