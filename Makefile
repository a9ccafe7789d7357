# The two commands of the README:
#   make demo   crawl the bundled local demo site with scrapy-aopic (the main job)
#   make test   run the test suite
# Both create .venv and install the package with its test extras on first use.
# CI (.ci/run) also runs `make test-floor`: the suite on the oldest Scrapy that
# setup.cfg accepts (SCRAPY_FLOOR), in .venv-floor.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# The oldest Scrapy release setup.cfg accepts (install_requires: scrapy>=2.13).
SCRAPY_FLOOR ?= 2.13
FLOOR_VENV ?= .venv-floor
FLOOR_STAMP := $(FLOOR_VENV)/.installed

.PHONY: demo test test-floor bench docs clean

$(STAMP): setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test,docs,bench,ml]"
	touch $(STAMP)

demo: $(STAMP)
	$(PY) example_project/run_demo.py

# Tests run in parallel (pytest-xdist): a worker per core, at most four.
# Every test serves its sites, Redis and JOBDIRs on its own ports and paths.
# `PYTEST_WORKERS=0 make test` runs them in one process.
PYTEST_WORKERS ?= auto
PYTEST_ARGS := -q -n $(PYTEST_WORKERS) --maxprocesses=4

test: $(STAMP)
	$(PY) -m pytest $(PYTEST_ARGS)

$(FLOOR_STAMP): setup.cfg pyproject.toml
	$(PYTHON) -m venv $(FLOOR_VENV)
	$(FLOOR_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(FLOOR_VENV)/bin/python -m pip install --quiet "scrapy==$(SCRAPY_FLOOR).*" -e ".[test]"
	touch $(FLOOR_STAMP)

# The suite on the oldest supported Scrapy (tests needing the bench/ml extras skip).
test-floor: $(FLOOR_STAMP)
	$(FLOOR_VENV)/bin/python -c "import scrapy; print('Scrapy', scrapy.__version__)"
	$(FLOOR_VENV)/bin/python -m pytest $(PYTEST_ARGS)

bench: $(STAMP)
	$(PY) benchmarks/run_all.py

docs: $(STAMP)
	$(PY) -m sphinx -W -b html docs docs/_build/html

clean:
	rm -rf $(VENV) $(FLOOR_VENV) docs/_build .pytest_cache
