# Two commands matter: `make demo` (set up, build the demo month, serve it) and `make test`.
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000

AZURITE := .azurite/node_modules/.bin/azurite-blob

.PHONY: install demo serve test lint typecheck format bench clean azurite

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

demo: install
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py collectstatic --noinput --verbosity 0
	FINOPS_DEMO_URL=http://$(HOST):$(PORT) $(BIN)/python manage.py demo
	$(BIN)/python manage.py runserver --noreload $(HOST):$(PORT)

serve: install
	$(BIN)/python manage.py runserver $(HOST):$(PORT)

test: install azurite
	$(BIN)/python manage.py collectstatic --noinput --verbosity 0
	$(BIN)/pytest -p no:cacheprovider $(PYTEST_ARGS)

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
	rm -rf $(VENV) db.sqlite3 staticfiles var .azurite
