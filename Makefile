# murphy — the two commands a newcomer needs are `make demo` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
TORCH_PIN := torch==2.13.0
STAMP := $(VENV)/.installed

.PHONY: setup demo test test-fast lint bench clean servers

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# torch is pinned and installed first: an unpinned torch would pull a multi-GB CUDA build.
	$(PY) -m pip install -q "$(TORCH_PIN)"
	$(PY) -m pip install -q -e ".[dev,s3,torch,service,postgres]" "$(TORCH_PIN)"
	touch $(STAMP)

demo: setup
	$(PY) training_images/examples/seed_demo.py

# Starts moto's server and SeaweedFS itself (tests/conftest.py), so nothing needs to run first.
test: setup
	$(PY) -m pytest -q tests

test-fast: setup
	$(PY) -m pytest -q tests -m "not compat and not slow"

lint: setup
	$(VENV)/bin/ruff check service tests benchmarks training_images
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

bench: setup
	$(PY) benchmarks/hook_overhead.py
	$(PY) benchmarks/trial_read.py
	$(PY) benchmarks/detection_latency.py
	$(PY) benchmarks/rule_throughput.py
	$(PY) benchmarks/rule_quality/run.py
	$(PY) benchmarks/api_load.py --paced 100
	$(PY) benchmarks/launch_latency.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build *.egg-info
