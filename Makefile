# Trauma-bond support bot. Two commands do everything on a fresh machine:
#   make run    set up, train if needed, start the bot and the web app
#   make test   set up and run every test
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON_VERSION := $(shell cat .python-version)
PYTHON310 := $(shell PYENV_VERSION=$(PYTHON_VERSION) pyenv which python3.10 2>/dev/null || command -v python3.10)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
CASES ?= $(firstword $(wildcard ../shared/eval/dev_cases.yml) tests/data/dev_cases.yml)
RASA_DATA := data/nlu data/rules

export RASA_TELEMETRY_ENABLED := false
export TF_CPP_MIN_LOG_LEVEL := 3
export PYTHONWARNINGS := ignore
export SQLALCHEMY_SILENCE_UBER_WARNING := 1

.PHONY: help setup build model run test test-fast validate stories screenshots eval bench soak audit clean

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

# requirements.lock pins every package (pip freeze of a working environment),
# so it is installed without resolving: no backtracking, the same versions
# everywhere. requirements.in lists what the project asks for directly.
$(STAMP): requirements.lock pyproject.toml
	@test -n "$(PYTHON310)" || { echo "Python 3.10 not found: install it (pyenv install $(PYTHON_VERSION))"; exit 1; }
	@test -x $(PY) || $(PYTHON310) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check "pip==26.3"
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps -r requirements.lock
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps -e .
	@touch $(STAMP)

node_modules/.installed: package-lock.json
	npm ci --no-audit --no-fund --silent
	@touch $@

setup: $(STAMP) ## Create .venv and install the locked dependencies (once)

build: setup ## Build the spaCy pipeline and check the generated Rasa files
	@$(PY) -m bot build

model: build ## Train a model if the data changed since the last one
	@$(PY) -m bot train

run: model ## Set up, train if needed, start the bot (5005), actions (5055) and web app (8080)
	@$(PY) -m bot run

validate: build ## rasa data validate (warnings fail) and the content checks
	@$(PY) -m bot check
	@$(PY) -m rasa data validate --domain domain --data $(RASA_DATA) --config config.yml --fail-on-warnings

stories: model ## rasa test on the test stories (every topic), failing on any prediction error
	@$(PY) -m bot stories

test: validate model node_modules/.installed ## Set up and run every test
	@bash scripts/system-deps.sh
	@$(PY) -m pytest -q
	@$(MAKE) --no-print-directory stories

test-fast: build ## Unit tests only (no servers, no training)
	@$(PY) -m pytest -q -m "not slow and not browser and not postgres"

screenshots: model node_modules/.installed ## Take the README's widget screenshots (375 px and 1280 px) into docs/screenshots
	@bash scripts/system-deps.sh
	@$(PY) -m pytest -q tests/test_widget_browser.py -k screenshots
	@mkdir -p docs/screenshots && cp var/screenshots/*-375.png var/screenshots/*-1280.png docs/screenshots/

eval: model ## Score the bot on CASES (default: ../shared/eval/dev_cases.yml)
	@$(PY) -m bot eval --cases $(CASES)

bench: model ## Measure this bot against stock Rasa in one run (~15 min); writes docs/benchmarks.md
	@bash scripts/system-deps.sh
	@$(PY) -m bot bench

soak: model ## 10-minute soak on one server (100 visitors, 10 000 senders): no errors, memory flat (not in make test)
	@bash scripts/system-deps.sh
	@$(PY) -m pytest -q -p no:cacheprovider tests/soak.py

audit: ## pip-audit of the locked dependencies in its own venv (says so when it cannot reach a vulnerability service)
	@bash scripts/audit.sh

clean: ## Remove trained models, results and runtime data (keeps .venv)
	rm -rf models/*.tar.gz var results .pytest_cache
