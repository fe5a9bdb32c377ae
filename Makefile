# Two commands matter: `make demo` (set up, build the demo month, serve it) and `make test`.
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000

AZURITE := .azurite/node_modules/.bin/azurite-blob
OIDC_PROVIDER := .oidc/node_modules/oidc-provider/package.json
# pytest-xdist workers for the parallel pass: the machine's cores, at most 2 (override: make test
# PYTEST_WORKERS=4).
PYTEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); [ "$$n" -gt 2 ] && n=2; echo $$n)

.PHONY: install demo serve test lint typecheck format bench clean azurite oidc

$(BIN)/python:
	$(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet ".[test]"
	touch $@

install: $(VENV)/.installed

# Azure Storage emulator for the az:// import tests (npm's azurite); they skip without it.
$(AZURITE):
	@if command -v npm >/dev/null; then \
		npm install --silent --no-audit --no-fund --prefix .azurite azurite@3.37.0; \
	else echo "npm not found: the Azure blob tests will skip"; fi

azurite: $(AZURITE)

# A real OpenID Connect provider for the single sign-on tests (npm's oidc-provider, run by
# tests/oidc/provider.mjs); they skip without it.
$(OIDC_PROVIDER):
	@if command -v npm >/dev/null; then \
		npm install --silent --no-audit --no-fund --prefix .oidc oidc-provider@9.13.3; \
	else echo "npm not found: the single sign-on tests will skip"; fi

oidc: $(OIDC_PROVIDER)

demo: install
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py collectstatic --noinput --verbosity 0
	FINOPS_DEMO_URL=http://$(HOST):$(PORT) $(BIN)/python manage.py demo
	SITE_URL=http://$(HOST):$(PORT) FINOPS_BASE_URL=http://$(HOST):$(PORT) \
		$(BIN)/python manage.py runserver --noreload $(HOST):$(PORT)

serve: install
	$(BIN)/python manage.py runserver $(HOST):$(PORT)

# Two passes: everything but the `worker` tests in parallel (pytest-xdist, one test database per
# xdist worker), then the `worker` tests serially: each starts a real Celery worker on the shared
# broker, and two at once would take each other's tasks. Exit code 5 ("no tests collected", e.g.
# PYTEST_ARGS naming a file without worker tests) is not a failure.
test: install azurite oidc
	$(BIN)/python manage.py collectstatic --noinput --verbosity 0
	$(BIN)/pytest -p no:cacheprovider -n $(PYTEST_WORKERS) -m "not worker" $(PYTEST_ARGS) \
		|| [ $$? -eq 5 ]
	$(BIN)/pytest -p no:cacheprovider -m worker $(PYTEST_ARGS) || [ $$? -eq 5 ]

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: install
	$(BIN)/mypy .

format: install
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

bench: install
	$(BIN)/python bench/ingest.py
	$(BIN)/python bench/attribution.py

clean:
	rm -rf $(VENV) db.sqlite3 staticfiles var .azurite .oidc
