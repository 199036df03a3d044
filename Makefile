# murphy — the two commands a newcomer needs are `make demo` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
TORCH_PIN := torch==2.13.0
STAMP := $(VENV)/.installed

.PHONY: setup demo demo-tf test test-fast lint bench clean servers images images-cpu

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# torch is pinned and installed first: an unpinned torch would pull a multi-GB CUDA build.
	$(PY) -m pip install -q "$(TORCH_PIN)"
	$(PY) -m pip install -q -e ".[dev,s3,torch,service,postgres,docker,kubernetes,xgboost]" "$(TORCH_PIN)"
	touch $(STAMP)

demo: setup
	$(PY) training_images/examples/seed_demo.py

# The same story with the article's own TensorFlow script (docs/tensorflow.md). TensorFlow lives
# in murphy/tensorflow-cpu, not in .venv, so the job runs on the Docker runtime.
demo-tf: setup
	infra/images/build.sh tensorflow-cpu rules
	MURPHY_RUNTIME=docker $(PY) training_images/examples/tf_seed/demo_tf.py

# Starts moto's server and SeaweedFS itself (tests/conftest.py), so nothing needs to run first.
test: setup
	$(PY) -m pytest -q tests

test-fast: setup
	$(PY) -m pytest -q tests -m "not compat and not slow and not tf"

lint: setup
	$(VENV)/bin/ruff check service tests benchmarks training_images
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

bench: setup
	$(PY) benchmarks/hook_overhead.py
	$(PY) benchmarks/hook_overhead_xgb.py
	$(PY) benchmarks/trial_read.py
	$(PY) benchmarks/detection_latency.py
	$(PY) benchmarks/rule_throughput.py
	$(PY) benchmarks/rule_quality/run.py
	$(PY) benchmarks/api_load.py --paced 100
	$(PY) benchmarks/launch_latency.py
	$(PY) benchmarks/pipe_input.py

# Container images, built locally without a registry (infra/images/build.sh; needs a running Docker
# engine, and root for the first debootstrap of murphy/base). images-cpu leaves out the multi-GB CUDA
# images murphy/pytorch-gpu and murphy/tensorflow-gpu.
images: setup
	infra/images/build.sh all

images-cpu: setup
	infra/images/build.sh base python pytorch-cpu tensorflow-cpu demo rules xgboost

# The one-command local deployment (docs/deployment.md): murphy with the Docker runtime,
# SeaweedFS (S3) and PostgreSQL on 127.0.0.1, through docker compose when it works, else as
# plain processes (MURPHY_UP_MODE=compose|processes|auto). `make down` keeps the data;
# `make down PURGE=1` removes it.
.PHONY: up down
up: setup
	infra/compose/up.sh

down:
	PURGE=$(PURGE) infra/compose/down.sh

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build *.egg-info
