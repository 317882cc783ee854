# Two commands do all the set-up on a fresh machine with Python 3.11:
#   make demo   - crawl the bundled local site farm through the plugin
#   make test   - lint, type-check and run the whole test suite (the command CI runs)
#   make check  - the fast tier for every edit: ruff and the tests that start no server,
#                 crawl or process (pure policy, fake clock, parsing, settings, add-on)
#   make bench  - the side-by-side benchmark (prints its run time; writes bench/results.md)
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test check lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,dev,redis,scrapy-redis,plot]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python example_project/demo.py

lint: $(STAMP)
	$(BIN)/ruff check scrapy_politeness tests example_project bench
	$(BIN)/mypy

test: lint
	$(BIN)/python -m pytest -q

check: $(STAMP)
	$(BIN)/ruff check scrapy_politeness tests example_project bench
	$(BIN)/python -m pytest -q -m "not integration"

bench: $(STAMP)
	$(BIN)/python -m bench --out bench/results.md

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache *.egg-info
