# Stateful JobSet. `make help` lists the targets.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
STATE_DIR ?= .cluster
# `make cluster-up`: full (KWOK nodes), node (a real node), apiserver, kueue (full + Kueue),
# trainer (node + Kubeflow Trainer).
PROFILE ?= full
PYTEST_ARGS ?=
# kubectl for deploy/undeploy: the one built by `make binaries` (kustomize built in), or your own
# (make deploy KUBECTL=kubectl). Talks to the cluster of the current KUBECONFIG / ~/.kube/config.
KUBECTL ?= $$($(PY) -c 'from localcluster.build import ensure_binaries; print(ensure_binaries().path("kubectl"))')
# `make run`: the Lease's namespace (use stateful-jobset-system when the in-cluster controller is
# installed too, so the local process competes for the same Lease instead of running beside it)
# and extra flags, e.g. RUN_ARGS='--namespaces=team-a --log-level=debug'.
RUN_LEASE_NAMESPACE ?= default
RUN_ARGS ?=
# `make soak`: how long the chaos lasts (quiescing and the final checks add up to ~2.5 min), and
# where the JSON report goes.
SOAK_SECONDS ?= 300
SOAK_REPORT ?= bench/results/soak.json

.DEFAULT_GOAL := help
.PHONY: help venv binaries gofields kueue trainer csi oldest-apiserver tools node-tools _node-tools demo demo-node-binaries smoke bench bench-reconcile bench-scale bench-scale-pod bench-compare bench-validation bench-snapshot upstream-jobset soak test test-serial test-unit test-integration test-e2e test-node node-binaries helm helm-lint cluster-up cluster-down \
	cluster-status lint crd deploy undeploy run image release

help: ## list the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml requirements.lock
	@echo "==> creating $(VENV) with the locked dependencies"
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -c requirements.lock -e '.[test,dev]'
	@touch $(STAMP)

venv: $(STAMP) ## create the virtualenv (locked versions)

binaries: venv ## build etcd, Kubernetes and KWOK from the Go module proxy (cached)
	@echo "==> control-plane binaries (first build takes a while; cached afterwards)"
	$(PY) -m localcluster build

kueue: venv ## build Kueue's manager from the Go module proxy (cached; the kueue profile and its e2e tests)
	@echo "==> Kueue (first build takes a while; cached afterwards)"
	$(PY) -m localcluster build --kueue

trainer: venv ## build Kubeflow Trainer's manager from the Go module proxy (cached; the trainer profile and its node tests)
	@echo "==> Kubeflow Trainer (first build takes a while; cached afterwards)"
	$(PY) -m localcluster build --trainer

oldest-apiserver: venv ## build the kube-apiserver of the oldest supported Kubernetes release (cached; its tests are in the integration tier)
	@echo "==> the oldest supported release's kube-apiserver (first build takes a while; cached afterwards)"
	$(PY) -m localcluster build --min-apiserver

demo: binaries node-tools demo-node-binaries ## a JobSet on the local control plane: a real node if this host can run containers, else KWOK
	$(PY) -m localcluster demo --state-dir $(STATE_DIR)

# The real node's binaries, only on a host that can run containers (elsewhere the demo runs on
# KWOK's nodes and needs none of them: no 20-minute build for nothing).
demo-node-binaries: venv
	@if $(PY) -c 'import sys; from localcluster.node import host_checks; sys.exit(bool(host_checks()))'; then \
		$(MAKE) --no-print-directory node-binaries csi; fi

smoke: binaries ## the control plane alone: a claim binds, an Indexed Job completes
	$(PY) -m localcluster smoke --state-dir $(STATE_DIR)

# Debian packages: prometheus (+promtool) for the e2e tier, shellcheck for lint, skopeo for the
# release's image archive (integration tier), and what the real
# node runs containers with (runc, the CNI plugins, busybox-static for the images, iptables and
# iproute2 for the kubelet and the bridge).
NODE_TOOLS := runc containernetworking-plugins busybox-static iptables iproute2
DEBIAN_TOOLS := prometheus shellcheck skopeo $(NODE_TOOLS)
define install_missing
	@missing=$$(for p in $(1); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "==> installing Debian packages:" $$missing; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; fi
endef
tools: ## Debian packages the tests and lint use (prometheus, shellcheck, skopeo, runc, CNI plugins, busybox-static)
	$(call install_missing,$(DEBIAN_TOOLS))

# What the real node needs, for the demo: installed where this is root on Debian (apt-get), else
# the demo says what is missing and runs on KWOK's nodes.
node-tools:
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then :; else \
		echo "==> not root with apt-get: the demo will say what the real node lacks"; exit 0; fi; \
	$(MAKE) --no-print-directory _node-tools
_node-tools:
	$(call install_missing,$(NODE_TOOLS))

node-binaries: venv ## build containerd, the kubelet and CoreDNS for the real node (cached)
	@echo "==> real-node binaries (first build takes a while; cached afterwards)"
	$(PY) -m localcluster build --node

csi: venv ## build the real node's CSI stack: csi-provisioner, csi-resizer, csi-snapshotter, snapshot-controller, our driver (cached)
	@echo "==> the real node's CSI stack (first build takes a few minutes; cached afterwards)"
	$(PY) -m localcluster build --csi

gofields: venv ## build the reader of upstream JobSet's Go types (make crd and the CRD tests use it; cached)
	@echo "==> the Go types reader (first build takes a minute; cached afterwards)"
	@$(PY) -c 'from localcluster.build import ensure_gofields; ensure_gofields()'

# helm, for the chart's tests and for installing from charts/stateful-jobset (cached like the rest).
ENSURE_HELM := $(PY) -c 'from localcluster.build import ensure_helm; print(ensure_helm())'
helm: venv ## build helm from the Go module proxy (cached) and print its path
	@$(ENSURE_HELM)

helm-lint: venv ## helm lint the chart (charts/stateful-jobset), every optional part on
	helm=$$($(ENSURE_HELM)) && $$helm lint --strict charts/stateful-jobset \
		--set podScope.enabled=true --set metrics.secure.enabled=true \
		--set metrics.serviceMonitor.enabled=true --set metrics.prometheusRule.enabled=true

test: binaries oldest-apiserver node-binaries csi tools helm kueue trainer upstream-jobset gofields ## run every tier (unit, integration, end-to-end, real node) in 4 pytest processes side by side (tests/run.py)
	$(PY) -m tests.run -- $(PYTEST_ARGS)

test-serial: binaries oldest-apiserver node-binaries csi tools helm kueue trainer upstream-jobset gofields ## every tier in one pytest process, one test after another (twice as long; for a quiet machine's timings)
	$(PY) -m pytest $(PYTEST_ARGS)

test-unit: venv ## unit tier only (no cluster, no Debian tools)
	$(PY) -m pytest tests/unit $(PYTEST_ARGS)

test-integration: binaries oldest-apiserver helm upstream-jobset tools gofields ## integration tier only (etcd + kube-apiserver; the Helm chart; the release; upstream JobSet)
	$(PY) -m pytest tests/integration $(PYTEST_ARGS)

test-e2e: binaries tools kueue ## end-to-end tier only (the whole local control plane, Prometheus, promtool)
	$(PY) -m pytest tests/e2e $(PYTEST_ARGS)

test-node: binaries node-binaries csi tools kueue trainer ## real-node tier only (containers run, volumes hold data)
	$(PY) -m pytest tests/node $(PYTEST_ARGS)

cluster-up: binaries ## start the local control plane in the background (PROFILE=kueue: with Kueue; PROFILE=trainer: the real node with Kubeflow Trainer)
	@$(PY) -m localcluster up --state-dir $(STATE_DIR) --profile $(PROFILE)

cluster-down: venv ## stop it
	@$(PY) -m localcluster down --state-dir $(STATE_DIR)

cluster-status: venv ## is it running
	@$(PY) -m localcluster status --state-dir $(STATE_DIR)

lint: venv tools ## ruff, ruff format, mypy --strict, shellcheck, yamllint
	$(VENV)/bin/ruff check controller localcluster tests bench
	$(VENV)/bin/ruff format --check controller localcluster tests bench
	$(VENV)/bin/mypy
	shellcheck .ci/run
	$(VENV)/bin/yamllint -c .yamllint.yaml manifests localcluster/kwok .yamllint.yaml

bench: binaries ## run every benchmark (work queue, informer, failover, reconcile cost, scale, Pod-scope scale); results in bench/results/
	$(PY) bench/bench_workqueue.py
	$(PY) bench/bench_informer.py
	$(PY) bench/bench_failover.py
	$(MAKE) bench-reconcile
	$(MAKE) bench-scale
	$(MAKE) bench-scale-pod

bench-reconcile: $(STAMP) ## one reconcile's planning time at admission's limits, event-loop stall (under a minute)
	$(PY) bench/bench_reconcile_cost.py

SIZES ?= 100 500 1000
bench-scale: binaries ## scale benchmark (SIZES='100 500 1000', about an hour) and its plot in docs/
	$(PY) -m pip install --quiet --disable-pip-version-check -c requirements.lock -e '.[bench]'
	$(PY) bench/bench_scale.py --sizes $(SIZES)
	$(PY) bench/plot_scale.py

COMPLETIONS ?= 4
bench-scale-pod: binaries ## scale benchmark, Pod-scope variant (2 Indexed Jobs of COMPLETIONS=4 pods, a claim each; SIZES)
	$(PY) -m pip install --quiet --disable-pip-version-check -c requirements.lock -e '.[bench]'
	$(PY) bench/bench_scale.py --sizes $(SIZES) --pod-scope $(COMPLETIONS)

# `make bench-compare`, `make bench-validation`: upstream JobSet's manager and CRD, built once from
# the Go module proxy (localcluster/gomod/jobset; cached like the other binaries).
ENSURE_UPSTREAM_JOBSET := $(PY) -m localcluster.upstream
upstream-jobset: venv ## build upstream JobSet v0.12.0's manager from the Go module proxy (cached)
	@echo "==> upstream JobSet's manager (first build takes a few minutes; cached afterwards)" >&2
	@$(ENSURE_UPSTREAM_JOBSET)

bench-compare: binaries upstream-jobset ## upstream JobSet vs this controller, same workload, fresh cluster each (SIZES)
	$(PY) -m pip install --quiet --disable-pip-version-check -c requirements.lock -e '.[bench]'
	$(PY) bench/bench_compare.py --sizes $(SIZES)
	$(PY) bench/plot_compare.py

bench-validation: binaries upstream-jobset ## API server CPU per JobSet create and status update: our CRD and admission policy vs upstream's CRD
	$(PY) -m pip install --quiet --disable-pip-version-check -c requirements.lock -e '.[bench]'
	$(PY) bench/bench_validation_cost.py

# `make bench-snapshot`: claim sizes in MiB and rounds per size (the real node, root).
SNAPSHOT_SIZES ?= 1 64 512
SNAPSHOT_ROUNDS ?= 3
bench-snapshot: binaries node-binaries csi node-tools ## retention Snapshot and restore on the real node's CSI stack: seconds from Completed to snapshot ready and claim released, restore to Bound and Running (SNAPSHOT_SIZES MiB)
	$(PY) bench/bench_snapshot.py --sizes $(SNAPSHOT_SIZES) --rounds $(SNAPSHOT_ROUNDS)

soak: binaries ## chaos soak: JobSets (retention Snapshot too) + leader kill -9 + API server restart, invariants checked (SOAK_SECONDS=300)
	$(PY) -m tests.soak --seconds $(SOAK_SECONDS) --report $(SOAK_REPORT)

crd: binaries gofields ## regenerate the Go types' field table, the JobSet CRD and its admission policy (from the local control plane), the Pod-scope admission policy, the chart's copies
	$(PY) -m localcluster.gotypes
	$(PY) -m localcluster crd
	$(PY) -m controller.api.admissiongen
	$(PY) -m controller.api.chartgen

# `make image`: the controller's image without a container engine (Debian packages, the locked
# wheels); IMAGE names it (default stateful-jobset:<version>), IMAGE_DIR is where it goes.
IMAGE ?=
IMAGE_DIR ?= build/image
image: venv ## build the controller's OCI image, no Docker needed (IMAGE=name:tag): build/image/
	$(PY) -m localcluster.controllerimage build --output $(IMAGE_DIR) $(if $(IMAGE),--tag $(IMAGE))

# `make release VERSION=x.y.z`: dist/ with the install manifest, the chart, the image archive and
# SHA256SUMS. VERSION must be controller.__version__ (the one source; CHANGELOG.md has its entry).
# REGISTRY=registry.example.com/team pins the image behind that prefix (manifest and chart).
VERSION ?=
REGISTRY ?=
release: venv ## write dist/ for VERSION (= controller.__version__): install manifest, chart, image, SHA256SUMS
	@test -n "$(VERSION)" || { echo "VERSION is not set: make release VERSION=x.y.z, the __version__ of controller/__init__.py" >&2; exit 2; }
	$(PY) -m localcluster.release --version $(VERSION) --output dist --image-dir $(IMAGE_DIR) $(if $(REGISTRY),--registry $(REGISTRY))

deploy: venv ## install CRD, RBAC, controller into the KUBECONFIG cluster (apply --server-side -k manifests/)
	$(KUBECTL) apply --server-side -k manifests/

undeploy: venv ## delete every JobSet (retention runs), then what deploy installed, CRD included
	@# JobSets first, while the controller still runs: their retention finalizer needs it.
	@kubectl=$(KUBECTL); \
	if $$kubectl get crd jobsets.jobset.x-k8s.io >/dev/null 2>&1; then \
	  $$kubectl delete jobsets.jobset.x-k8s.io --all --all-namespaces --wait=true --timeout=300s || { \
	    echo "JobSets are still being deleted: is the controller running? See docs/operations.md (finalizer escape hatch)" >&2; exit 1; }; \
	fi; \
	$$kubectl delete -k manifests/ --ignore-not-found --wait=true

run: venv ## run the controller locally against the KUBECONFIG cluster (the CRD must be installed)
	@test -n "$$KUBECONFIG" || { echo "KUBECONFIG is not set (e.g. export KUBECONFIG=$(STATE_DIR)/kubeconfig after make cluster-up)" >&2; exit 2; }
	$(PY) -m controller --leader-election-namespace=$(RUN_LEASE_NAMESPACE) $(RUN_ARGS)
