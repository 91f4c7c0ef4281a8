# GPU kernels from Python: every target creates .venv on first use (see README, Quickstart).
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

# make test-gpu runs on GPU boxes that have torch, triton and nbval but no .venv:
# it uses .venv when present, the python3 on PATH otherwise or when SYSTEM_PYTHON=1.
ifeq ($(SYSTEM_PYTHON)$(wildcard $(VENV_PY)),$(VENV_PY))
GPU_PY := $(VENV_PY)
else
GPU_PY := python3
endif

NBVAL   := --nbval-lax --nbval-current-env
# one file per worker, so a notebook's cells stay together; 2 workers match the CI machine
XDIST   := -n 2 --dist loadfile

.PHONY: help lab run doctor test test-gpu bench record prepare clean

help:
	@echo "make lab       start JupyterLab in notebooks/"
	@echo "make run       execute every notebook into var/executed/ and print a summary"
	@echo "make doctor    what this machine can run, lesson by lesson"
	@echo "make test      lint + unit tests + every notebook under nbval (CPU is fine)"
	@echo "make test-gpu  the same suite plus GPU-only tests, with COURSE_STRICT=1"
	@echo "make bench     run the lesson benchmarks and write docs/results/<device>.json/.md"
	@echo "make record    (GPU) record what the %%requires cells show, into docs/recordings/"
	@echo "make prepare   lecture mode: build every extension and fill the NVRTC cache first"
	@echo "make clean     remove generated files (var/) and caches"

$(STAMP): requirements.txt pyproject.toml
	@test -x $(VENV_PY) || python3 -m venv $(VENV)
	$(VENV_PY) -m pip install -q --upgrade pip
	$(VENV_PY) -m pip install -q -r requirements.txt
	@rm -f $(VENV)/.installed-*
	@touch $@

# Jupyter refuses to run as root unless told; cloud GPU containers often run as root.
LAB_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root)

lab: $(STAMP)
	$(VENV)/bin/jupyter lab --notebook-dir=notebooks $(LAB_ROOT)

run: $(STAMP)
	$(VENV_PY) -m course_utils run

doctor: $(STAMP)
	$(VENV_PY) -m course_utils doctor

test: $(STAMP)
	$(VENV_PY) -m ruff check .
	$(VENV_PY) -m pytest $(XDIST) tests notebooks $(NBVAL)

test-gpu:
	@test "$(GPU_PY)" != python3 || echo "test-gpu: no .venv here (or SYSTEM_PYTHON=1): using $$(command -v python3)"
	COURSE_STRICT=1 PYTHONPATH=$(CURDIR)$${PYTHONPATH:+:$$PYTHONPATH} \
	    $(GPU_PY) -m pytest $(XDIST) tests notebooks $(NBVAL)

bench:
	PYTHONPATH=$(CURDIR)$${PYTHONPATH:+:$$PYTHONPATH} $(GPU_PY) -m course_utils bench

# like bench: on a GPU box, with .venv or the box's own python3 (PYTHONPATH for its wheels);
# NB="01 02" records only those notebooks
record:
	COURSE_STRICT=1 PYTHONPATH=$(CURDIR)$${PYTHONPATH:+:$$PYTHONPATH} \
	    $(GPU_PY) -m course_utils record $(NB)

prepare:
	PYTHONPATH=$(CURDIR)$${PYTHONPATH:+:$$PYTHONPATH} $(GPU_PY) -m course_utils prepare

clean:
	find var -mindepth 1 ! -name README.md -exec rm -rf {} +
	rm -rf .pytest_cache .ruff_cache
	find . -name __pycache__ -not -path './$(VENV)/*' -exec rm -rf {} +
