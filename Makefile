# GPU kernels from Python: every target creates .venv on first use (see README, Quickstart);
# SYSTEM_PYTHON=1 uses the python3 on PATH as it is instead (a GPU box with torch preinstalled).
SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV     := .venv
VENV_PY  := $(VENV)/bin/python
# Reinstall only when what we install changes: the stamp is keyed on requirements + metadata.
REQ_HASH := $(shell cat requirements.txt pyproject.toml | sha256sum | cut -c1-16)
STAMP    := $(VENV)/.installed-$(REQ_HASH)

# torch guesses CUDA_HOME from the first nvcc on PATH (often a wrapper in /usr/local/bin).
ifneq ($(wildcard /usr/local/cuda/bin/nvcc),)
export CUDA_HOME ?= /usr/local/cuda
endif

# SYSTEM_PYTHON=1: no .venv and no install; every target runs the python3 on PATH.
ifneq ($(SYSTEM_PYTHON),)
PY    := python3
SETUP :=
else
PY    := $(VENV_PY)
SETUP := $(STAMP)
endif
# test-gpu and bench run on GPU boxes that have torch, triton and nbval but often no .venv:
# they use .venv when present, the python3 on PATH otherwise (and with SYSTEM_PYTHON=1).
ifeq ($(SYSTEM_PYTHON)$(wildcard $(VENV_PY)),$(VENV_PY))
GPU_PY := $(VENV_PY)
else
GPU_PY := python3
endif

# Every target imports the course from this checkout, installed or not, and so do the notebook
# kernels they start (a kernel inherits the environment).
export PYTHONPATH := $(CURDIR)$(if $(PYTHONPATH),:$(PYTHONPATH))

NBVAL   := --nbval-lax --nbval-current-env
TEST_PATHS := tests notebooks
# one worker per core; one file per worker, so a notebook's cells stay together in one kernel
XDIST   := -n $(shell nproc 2>/dev/null || echo 2) --dist loadfile

.PHONY: help lab run doctor test test-gpu bench record prepare sanitize clean

help:
	@echo "make lab       start JupyterLab in notebooks/"
	@echo "make run       execute every notebook into var/executed/ and print a summary"
	@echo "make doctor    what this machine can run, lesson by lesson"
	@echo "make test      lint + unit tests + every notebook under nbval (CPU is fine)"
	@echo "make test-gpu  the same suite plus GPU-only tests, with COURSE_STRICT=1"
	@echo "make bench     run the lesson benchmarks and write docs/results/<device>.json/.md"
	@echo "make record    (GPU) record what the %%requires cells show, into docs/recordings/"
	@echo "make prepare   lecture mode: build every extension and fill the NVRTC cache first"
	@echo "make sanitize  (GPU) compute-sanitizer over every CUDA kernel -> docs/results/"
	@echo "make clean     remove generated files (var/) and caches"

$(STAMP): requirements.txt pyproject.toml
	@test -x $(VENV_PY) || python3 -m venv $(VENV)
	$(VENV_PY) -m pip install -q --upgrade pip
	$(VENV_PY) -m pip install -q -r requirements.txt
	@rm -f $(VENV)/.installed-*
	@touch $@

# Jupyter refuses to run as root unless told; cloud GPU containers often run as root.
LAB_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root)

lab: $(SETUP)
	$(PY) -m jupyter lab --notebook-dir=notebooks $(LAB_ROOT)

# (first: what a fresh kernel pays before a notebook's first line, stage by stage; a failure
# to time it does not stop the run)
run: $(SETUP)
	-$(PY) -m course startup
	$(PY) -m course run

doctor: $(SETUP)
	$(PY) -m course doctor

# (.venv always has ruff; a GPU box's own Python may not, and then says so)
test: $(SETUP)
	@if $(PY) -m ruff --version >/dev/null 2>&1; then set -x; $(PY) -m ruff check .; \
	else echo "test: no ruff for $(PY): lint skipped (make test without SYSTEM_PYTHON lints)"; fi
	$(PY) -m pytest $(XDIST) $(TEST_PATHS) $(NBVAL)

# A worker per core shares one GPU: each gives its allocator's cache back after every test and
# notebook cell (course_utils/shared_gpu.py), and expandable segments keep the cache from
# fragmenting across the notebooks' many shapes.
test-gpu:
	@test "$(GPU_PY)" != python3 || echo "test-gpu: no .venv here (or SYSTEM_PYTHON=1): using $$(command -v python3)"
	COURSE_STRICT=1 COURSE_SHARED_GPU=1 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True $(GPU_PY) -m pytest $(XDIST) $(TEST_PATHS) $(NBVAL)

bench:
	$(GPU_PY) -m course bench

# like bench, on a GPU box; NB="01 02" records only those notebooks
record:
	COURSE_STRICT=1 $(GPU_PY) -m course record $(NB)

prepare:
	$(GPU_PY) -m course prepare

# memcheck, racecheck, initcheck, synccheck over every registered CUDA kernel (make test-gpu
# runs it too, as tests/test_sanitize.py); ONLY="matmul/mma" narrows it
sanitize:
	$(GPU_PY) -m course sanitize $(if $(ONLY),--only $(ONLY))

clean:
	find var -mindepth 1 ! -name README.md -exec rm -rf {} +
	rm -rf .pytest_cache .ruff_cache
	find . -name __pycache__ -not -path './$(VENV)/*' -exec rm -rf {} +
