# Two commands a newcomer needs: `make demo` and `make test`. Each sets everything up.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
DEPS := $(VENV)/.stamp-deps
BUILT := $(VENV)/.stamp-built
# Never let pip build isolation or an unpinned requirement pull another torch.
PIP := $(PY) -m pip install --disable-pip-version-check -q

.PHONY: demo test lint bench build clean

$(PY):
	$(PYTHON) -m venv $(VENV)

$(DEPS): requirements.txt | $(PY)
	$(PIP) -r requirements.txt
	touch $@

$(BUILT): $(DEPS) setup.py $(wildcard csrc_stub/*.cpp csrc_stub/*.h)
	$(PIP) --no-build-isolation --no-deps -e .
	touch $@

build: $(BUILT)

demo: $(BUILT)
	$(PY) examples/demo.py

test: $(BUILT)
	$(PY) -m pytest -q

lint: $(DEPS)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

bench: $(BUILT)
	$(PY) benchmarks/run.py

clean:
	rm -rf $(VENV) build *.egg-info torch_mydev/*.so
