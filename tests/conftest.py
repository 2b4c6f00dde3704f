import os, pytest

os.environ.setdefault('OMP_NUM_THREADS', '1')
os.environ.setdefault('TOKENIZERS_PARALLELISM', 'false')
os.environ.setdefault('HF_HUB_OFFLINE', '1')


def pytest_addoption(parser):
    parser.addoption('--slow', action='store_true', default=False, help='also run tests marked slow')


def pytest_collection_modifyitems(config, items):
    if config.getoption('--slow') or 'slow' in (config.getoption('-m') or ''):
        return
    skip = pytest.mark.skip(reason='slow: run with `make test-slow`')
    for item in items:
        if 'slow' in item.keywords:
            item.add_marker(skip)


def skip_unless_ci(reason: str):
    "Skip on a developer's machine that lacks what a test needs; under `CI=true` the same lack fails the run."
    if os.environ.get('CI') == 'true':
        pytest.fail(reason)
    pytest.skip(reason)
