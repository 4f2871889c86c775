# Stateful JobSet. `make help` lists the targets.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
STATE_DIR ?= .cluster
PYTEST_ARGS ?=

.DEFAULT_GOAL := help
.PHONY: help venv binaries demo smoke test test-unit test-integration test-e2e cluster-up cluster-down \
	cluster-status lint crd

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml requirements.lock
	@echo "==> creating $(VENV) with the locked dependencies"
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -c requirements.lock -e '.[test,dev]'
	@touch $(STAMP)

venv: $(STAMP) ## create the virtualenv (locked versions)

binaries: venv ## build etcd, Kubernetes and KWOK from the Go module proxy (cached)
	@echo "==> control-plane binaries (first build takes a while; cached afterwards)"
	$(PY) -m localcluster build

demo: binaries ## local control plane + controller + a JobSet run to completion, narrated
	$(PY) -m localcluster demo --state-dir $(STATE_DIR)

smoke: binaries ## the control plane alone: a claim binds, an Indexed Job completes
	$(PY) -m localcluster smoke --state-dir $(STATE_DIR)

test: binaries ## run every tier: unit, integration, end-to-end
	$(PY) -m pytest $(PYTEST_ARGS)

test-unit: venv ## unit tier only (no cluster)
	$(PY) -m pytest tests/unit $(PYTEST_ARGS)

test-integration: binaries ## integration tier only (etcd + kube-apiserver)
	$(PY) -m pytest tests/integration $(PYTEST_ARGS)

test-e2e: binaries ## end-to-end tier only (the whole local control plane)
	$(PY) -m pytest tests/e2e $(PYTEST_ARGS)

cluster-up: binaries ## start the local control plane in the background
	@$(PY) -m localcluster up --state-dir $(STATE_DIR)

cluster-down: venv ## stop it
	@$(PY) -m localcluster down --state-dir $(STATE_DIR)

cluster-status: venv ## is it running
	@$(PY) -m localcluster status --state-dir $(STATE_DIR)

lint: venv ## ruff, ruff format, mypy --strict
	$(VENV)/bin/ruff check controller localcluster tests bench
	$(VENV)/bin/ruff format --check controller localcluster tests bench
	$(VENV)/bin/mypy

crd: binaries ## regenerate the JobSet CRD from the local control plane
	$(PY) -m controller.api.crdgen --local
