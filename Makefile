# The two commands of the README:
#   make demo   crawl the bundled local demo site with scrapy-aopic (the main job)
#   make test   run the test suite
# Both create .venv and install the package with its test extras on first use.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test bench docs clean

$(STAMP): setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test,docs,bench,ml]"
	touch $(STAMP)

demo: $(STAMP)
	$(PY) example_project/run_demo.py

test: $(STAMP)
	$(PY) -m pytest -q

bench: $(STAMP)
	$(PY) benchmarks/run_all.py

docs: $(STAMP)
	$(PY) -m sphinx -W -b html docs docs/_build/html

clean:
	rm -rf $(VENV) docs/_build .pytest_cache
