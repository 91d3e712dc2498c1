# make venv       - .venv with everything the tests and the demo need (idempotent)
# make test       - lint, then the whole test suite
# make test-fast  - the core and CLI tests, no training (under 30 s)
# make lint       - ruff
# make demo       - the one-command demo on the synthetic corpus
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# the CPU wheel that lies in /opt/wheels on this kind of machine; override elsewhere (e.g. TORCH=torch==2.5.1)
TORCH ?= torch==2.13.0
STAMP := $(VENV)/.installed
# two torch threads on two busy cores run ~100x slower
export OMP_NUM_THREADS ?= 1

.PHONY: venv test test-fast lint demo bench

venv: $(STAMP)

$(STAMP): setup.py pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip setuptools wheel
	$(BIN)/pip install $(if $(wildcard /opt/wheels),--find-links /opt/wheels) "$(TORCH)" cython numpy
	@# fairseq: the Python 3.11 fork must build against the torch just installed
	if $(BIN)/python -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then \
	  $(BIN)/pip install --no-build-isolation --no-cache-dir fairseq-fixed==0.12.3.1; \
	else \
	  $(BIN)/pip install fairseq==0.12.2; \
	fi
	$(BIN)/pip install -e ".[all]"
	@# fairseq requires torchaudio, and pip finds none built for this torch; a mismatched one breaks
	@# `import transformers` (OSError), and nothing here needs audio
	$(BIN)/pip uninstall -y torchaudio
	touch $(STAMP)

lint: venv
	$(BIN)/ruff check .

test: lint
	$(BIN)/python -m pytest -q

test-fast: venv
	$(BIN)/python -m pytest -q -m "not training"

bench: venv
	$(BIN)/python scripts/bench.py

demo: venv
	$(BIN)/python examples/fairseq_demo.py --out demo-run
