# The README's two commands: `make demo` and `make test`. Both do all set-up themselves.
SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV      := .venv
PY        := $(VENV)/bin/python
BIN       := $(abspath $(VENV)/bin)
SIM       := $(PY) tests/sim/simctl.py
# Everything below runs with the venv's tools first on PATH and the checkout linked as a collection.
export PATH := $(BIN):$(PATH)
export ANSIBLE_CONFIG := $(abspath ansible.cfg)

.PHONY: help setup browser pushgateway promtool sim-build sim-up sim-status sim-down sim-unit lint sanity unit integration test-newest test-matrix test demo report-example bench bench-scale profile build device-bundle

help: ## List the targets
	@grep -E '^[a-z-]+:.*##' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | expand -t 16

setup: $(VENV)/.installed .collections/ansible_collections/gpuops/scheduling ## Python venv with ansible, kubernetes.core, linters

$(VENV)/.installed: requirements.txt requirements-dev.txt
	@bash tests/setup.sh

.collections/ansible_collections/gpuops/scheduling:
	@mkdir -p $(@D) && ln -sfn ../../.. $@

sim-build: setup ## Build (or reuse) the simulated cluster's binaries
	@bash tests/sim/build.sh >/dev/null

sim-up: sim-build ## Start the simulated GPU cluster on 127.0.0.1 (kubeconfig: .sim/kubeconfig)
	@$(SIM) up

sim-status: ## Show the simulated cluster's processes, listeners and nodes
	@$(SIM) status

sim-down: ## Stop every process of the simulated cluster, and of the parallel test workers' clusters (.sim-w*)
	@$(SIM) down
	@for dir in .sim-w*/; do if [ -d "$$dir" ]; then GPUOPS_SIM_DIR=$$dir $(SIM) down; fi; done

lint: setup ## ansible-lint, production profile
	@ansible-lint --profile production

sanity: setup ## ansible-test sanity on a copy laid out as ansible_collections/gpuops/scheduling
	@bash tests/sanity.sh

unit: setup sim-unit promtool ## Unit tests of the pure logic, and the built collection's packaging
	@$(PY) -m pytest -q tests/unit tests/packaging

sim-unit: ## Go tests of the simulated node's device plugin and runtime (tests/sim/node)
	@cd tests/sim/node && CGO_ENABLED=0 GOFLAGS=-mod=mod go test ./...

browser: ## Headless Chromium for the summary page's browser test (apt-installs Debian's chromium when missing)
	@bash tests/browser.sh

pushgateway: ## Prometheus Pushgateway for the metrics test (apt-installs Debian's prometheus-pushgateway when missing)
	@bash tests/pushgateway.sh

promtool: ## promtool for the test of the docs' alerting rules (apt-installs Debian's prometheus when missing, service kept stopped)
	@bash tests/promtool.sh

integration: sim-up browser pushgateway ## Integration tests, in parallel on one simulated cluster per worker (GPUOPS_TEST_WORKERS: how many)
	@$(PY) -m pytest -q -n auto tests/integration

test-newest: sim-build promtool ## The newest supported stack (Python 3.13, ansible-core 2.21, kubernetes.core 6.6.0): unit tests and the focused integration set (tests/stack.sh)
	@bash tests/stack.sh newest

test-matrix: sim-build promtool ## Every supported combination of Python, ansible-core, kubernetes.core and the kubernetes client, each in .venvs/<name>: unit, integration set, sanity (tests/stack.sh)
	@bash tests/stack.sh --sanity all

test: setup ## Everything CI runs: lint, sanity, unit, integration, test-newest, each with its time (tests/stages.sh)
	@MAKE="$(MAKE)" bash tests/stages.sh lint sanity unit integration test-newest

demo: sim-up ## The main job on the simulated cluster: playbooks/gpu_demo.yml -i inventory/sim
	@ansible-playbook playbooks/gpu_demo.yml -i inventory/sim

report-example: sim-up browser ## docs/report-example/: one node's reports (en, zh), the summary of a mixed 10-node parallel run, its screenshots
	@$(PY) tests/report_example.py

bench: sim-up ## Benchmarks; results in bench/results/
	@$(PY) bench/run.py

bench-scale: sim-build ## The ledger at 5,000 nodes / 150,000 pods (a kept bench cluster, grown once: ~4 min); bench/results/*-scale.md
	@$(PY) bench/ledger_big.py

profile: sim-up ## Where a run's time and a fleet's CPU go (profile_tasks, py-spy); bench/results/*-profile.md
	@$(PY) bench/profile.py

device-bundle: setup ## What the GPU machine needs for tests/device/walkthrough.sh, in .build/device-bundle (carry it)
	@bash tests/device/bundle.sh

build: setup ## Build the collection tarball
	@ansible-galaxy collection build --force
