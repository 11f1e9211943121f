# Two commands matter: `make demo` and `make test`. Everything else is for developers.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

# Prefect runs embedded (a temporary local API); keep its state inside the project
# unless the caller chose a PREFECT_HOME, and never phone home.
export PREFECT_HOME ?= $(CURDIR)/.prefect
export PREFECT_SERVER_ANALYTICS_ENABLED ?= false
export DO_NOT_TRACK ?= 1
export PREFECT_SERVER_UI_ENABLED ?= false
export PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS ?= 180
export PREFECT_LOGGING_LEVEL ?= WARNING

DEMO_DIR  ?= demo-output
# benchcert demo writes its store to $(DEMO_DIR)/benchcert.duckdb and its runs under DEMO_ARTS.
DEMO_ARTS := $(DEMO_DIR)/artifacts

.PHONY: demo test wheel-check quick chromium bench bench-1b bench-all study serve dashboard venv clean

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[test]'
	touch $@

venv: $(STAMP)

# `benchcert demo` refuses a folder that already holds a store; make demo starts anew in its own folder.
demo: $(STAMP)
	rm -rf $(DEMO_DIR)
	$(BIN)/benchcert demo --dir $(DEMO_DIR)

# The whole default suite, Monte-Carlo level tests included (what CI runs), on two worker processes
# (pytest-xdist). --dist loadscope keeps a module's tests on one worker, so a module's fixture (a
# store, a server, a browser) is built once; xdist_group marks would not (xdist 3.8 cannot rename
# pytest 9's node ids, so loadgroup ignores them). Each worker starts its own session fixtures.
test: $(STAMP) chromium wheel-check
	$(BIN)/python -m pytest -q -n 2 --dist loadscope -m 'not slow' $(PYTEST_ARGS)

# The developer's quick run: everything but the Monte-Carlo level tests and the full-scale studies,
# on two worker processes like make test.
quick: $(STAMP) chromium
	$(BIN)/python -m pytest -q -n 2 --dist loadscope $(PYTEST_ARGS)

# The dashboard's browser tests drive Debian's Chromium (or BENCHCERT_CHROMIUM). When it is
# missing: root installs the package, anyone else gets the one command to run.
CHROMIUM ?= chromium
chromium:
	@if command -v $(CHROMIUM) >/dev/null 2>&1 || [ -x "$${BENCHCERT_CHROMIUM:-/nonexistent}" ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "make test: installing Debian's chromium for the browser tests (apt-get)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	else \
	    echo "make test: the browser tests need Chromium; install it with: sudo apt-get install -y chromium" >&2; \
	    exit 2; \
	fi

# The scale figures of docs/scale.md in one run (not part of `make test`; about 8 minutes here):
# the 80M-response ingest and audit with the store read against a DuckDB scan (again on a store
# whose item codes are not in row order, as in real logs), the 320M audit out of core and on a
# 2-worker LocalCluster, many small files against one file, and the command line's latency; the
# load average before and after.
bench: $(STAMP)
	@echo "== load average $$(cut -d' ' -f1-3 /proc/loadavg) on $$(nproc) CPUs"
	$(BIN)/python benchmarks/scale.py --shape 4000x20000
	$(BIN)/python benchmarks/scale.py --shape 4000x20000 --shuffle-item-ids --read-only
	$(BIN)/python benchmarks/scale.py --shape 16000x20000 --out-of-core --dask-workers 2
	$(BIN)/python benchmarks/small_files.py
	$(BIN)/python benchmarks/cli_latency.py --no-server
	$(BIN)/python benchmarks/nightly_suite.py
	@echo "== load average $$(cut -d' ' -f1-3 /proc/loadavg)"

# A billion responses (50,000 models x 20,000 items) ingested and audited out of core, beside the DuckDB
# scan of the same rows in the same run (docs/scale.md; about an hour on 2 CPUs at load 9, 1.3 GB of
# disk: the Parquet input, the store, its artifacts; the audit's peak 3.8 GiB). BENCH_1B_DIR keeps them.
BENCH_1B_DIR ?= $(CURDIR)/.bench-1b
bench-1b: $(STAMP)
	@echo "== load average $$(cut -d' ' -f1-3 /proc/loadavg) on $$(nproc) CPUs"
	$(BIN)/python benchmarks/scale.py --shape 50000x20000 --out-of-core --timeout 28800 \
	    --keep $(BENCH_1B_DIR) --json $(BENCH_1B_DIR)/scale-1b.json
	@echo "== load average $$(cut -d' ' -f1-3 /proc/loadavg)"

# Every benchmarks/*.py script in turn with its defaults (hours).
bench-all: $(STAMP)
	@set -e; for f in benchmarks/*.py; do echo "== $$f"; $(BIN)/python $$f; done

# Full-scale simulation studies carry the `slow` marker.
study: $(STAMP)
	$(BIN)/python -m pytest -q -m slow $(PYTEST_ARGS)

# The demo's artifacts as a static site on http://127.0.0.1:8765/ (after make demo).
dashboard: $(STAMP)
	$(BIN)/benchcert dashboard build --artifacts $(DEMO_ARTS) --out $(DEMO_DIR)/dashboard
	$(BIN)/benchcert dashboard serve --dir $(DEMO_DIR)/dashboard

# A local Prefect server on 127.0.0.1 plus both deployments (nightly schedule, checkpoint trigger).
serve: $(STAMP)
	bash deployments/serve_local.sh

# benchcert as users install it (part of make test): the sdist and wheel built with python -m build,
# the wheel installed (not editable) into $(WHEEL_VENV) with constraints.txt's pins, then, from a
# folder outside the checkout, benchcert demo, a compare on its store and an import of every module
# (tools/wheel_check.py; the dependencies stay installed between runs while their pins do not change).
# The wheel's virtualenv lies inside .venv so that make clean, git and the tests that skip .venv skip it too.
WHEEL_VENV ?= $(VENV)/wheel-check
wheel-check: $(STAMP)
	$(BIN)/python tools/wheel_check.py --venv $(WHEEL_VENV)

clean:
	rm -rf $(VENV) $(DEMO_DIR) .prefect .pytest_cache serve-state
