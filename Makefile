# make venv       - .venv with everything the tests and the demo need (idempotent)
# make test       - lint, then the whole test suite, then the HF tests under transformers 4.x (test-hf4)
# make test-hf4   - the Hugging Face tests in .venv-hf4, under transformers 4.57.6 (.venv has the newest 5.x)
# make test-fast  - the core and CLI tests, no training (about 3 minutes)
# make lint       - ruff
# make demo       - the one-command demo on the synthetic corpus (examples/fairseq_demo.py)
# make bench      - the metric core's benchmarks (python -m scripts.bench; results in BENCHMARKS.md)
# make gpu-check  - the GPU check (python -m scripts.gpu_check, docs/gpu.md) into $(GPU_CHECK_OUT)/;
#                   options in GPU_CHECK_ARGS, e.g. GPU_CHECK_ARGS="--data DIR --budget 450"
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# the CPU wheel that lies in /opt/wheels on this kind of machine; override elsewhere (e.g. TORCH=torch==2.5.1)
TORCH ?= torch==2.13.0
STAMP := $(VENV)/.installed
# A second, Hugging Face-only environment (no fairseq: the HF tests need none) at the 4.x end of the
# transformers range of setup.py's HF extra; .venv gets the newest 5.x. Pinned to what pip resolves
# for transformers 4.57.6, numpy too (so that a later numpy cannot break this older transformers).
HF4_VENV ?= .venv-hf4
HF4_BIN := $(HF4_VENV)/bin
HF4_STAMP := $(HF4_VENV)/.installed
HF4_TRANSFORMERS := 4.57.6
HF4_PINS := transformers==$(HF4_TRANSFORMERS) tokenizers==0.22.2 huggingface-hub==0.36.2 accelerate==1.15.0 \
            safetensors==0.8.0 numpy==2.4.6 pytest==9.2.0
HF_TESTS := tests/hf/test_hf_callback.py tests/hf/test_hf_models.py tests/hf/test_hf_early_stopping.py \
            tests/hf/test_hf_beam_search.py tests/hf/test_hf_settings.py \
            tests/hf/test_hf_saving.py tests/hf/test_hf_async.py tests/hf/test_hf_async_skip.py \
            tests/hf/test_hf_async_resume.py tests/hf/test_hf_async_tensorboard.py tests/hf/test_hf_async_ddp.py \
            tests/hf/test_hf_batching.py tests/hf/test_hf_search_choice.py tests/hf/test_hf_dtype_matrix.py \
            tests/hf/test_hf_async_news.py
# two torch threads on two busy cores run ~100x slower
export OMP_NUM_THREADS ?= 1

# the GPU check runs in the Python that has the GPU's torch: .venv's when there is one, else $(PYTHON)
GPU_PYTHON ?= $(if $(wildcard $(BIN)/python),$(BIN)/python,$(PYTHON))
GPU_CHECK_OUT ?= gpu-check
GPU_CHECK_ARGS ?=

.PHONY: venv venv-hf4 test test-hf4 test-fast lint demo bench gpu-check

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

venv-hf4: $(HF4_STAMP)

$(HF4_STAMP): setup.py pyproject.toml Makefile
	test -x $(HF4_BIN)/python || $(PYTHON) -m venv $(HF4_VENV)
	$(HF4_BIN)/pip install --upgrade pip
	$(HF4_BIN)/pip install $(if $(wildcard /opt/wheels),--find-links /opt/wheels) "$(TORCH)" $(HF4_PINS) -e ".[hf]"
	touch $(HF4_STAMP)

lint: venv
	$(BIN)/ruff check .

test: lint
	$(BIN)/python -m pytest -q
	$(MAKE) --no-print-directory test-hf4

test-hf4: $(HF4_STAMP)
	@# the tests skip when the framework does not import: make that an error here, and check the version
	$(HF4_BIN)/python -c 'import nbest_eval.hf, transformers as t; assert t.__version__ == "$(HF4_TRANSFORMERS)", t.__version__'
	$(HF4_BIN)/python -m pytest -q $(HF_TESTS)

test-fast: venv
	$(BIN)/python -m pytest -q -m "not training"

bench: venv
	$(BIN)/python -m scripts.bench

demo: venv
	$(BIN)/python examples/fairseq_demo.py --out demo-run

gpu-check:
	$(GPU_PYTHON) -m scripts.gpu_check --out $(GPU_CHECK_OUT) $(GPU_CHECK_ARGS)
