# Two commands a newcomer needs: `make demo` and `make test`. Each sets everything up.
# `make test TORCH=2.14.1` does the same against another torch release, in its own venv.
PYTHON ?= python3.11
# The torch pinned in requirements.txt (the one place it is pinned) is the default.
PINNED_TORCH := $(shell sed -n 's/^torch==\([^ ;#]*\).*/\1/p' requirements.txt)
TORCH ?= $(PINNED_TORCH)
ifeq ($(TORCH),$(PINNED_TORCH))
VENV := .venv
else
VENV := .venv-$(TORCH)
endif
PY := $(VENV)/bin/python
TOOLS := $(VENV)/.stamp-tools
DEPS := $(VENV)/.stamp-deps
BUILT := $(VENV)/.stamp-built
# Never let pip build isolation or an unpinned requirement pull another torch.
# --no-compile, then compileall on every core: pip byte-compiles what it installs on one
# core (the requirements took 42 s, against 20 s plus 15 s here). The bytecode is written at
# set-up for `make demo` and `make bench` too: with PYTHONDONTWRITEBYTECODE set (as on this
# machine) nothing writes it later, and each process would compile torch's sources again.
PIP := $(PY) -m pip install --disable-pip-version-check --no-compile -q
COMPILE := $(PY) -m compileall -q -j 0
SITE_PACKAGES = $$($(PY) -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
# What the stub's build imports and runs besides torch (setup.py, BuildExtension's ninja).
BUILD_TOOLS := numpy setuptools wheel ninja

.PHONY: demo test lint bench build clean
# The set-up runs its own jobs side by side ($(BUILT)); `make -j` would install twice at once.
.NOTPARALLEL:

$(PY):
	$(PYTHON) -m venv $(VENV)

# The torch to build against (this exact release) and the build's tools come first, so the
# stub can build while pip installs the rest. What they installed is then a constraint on
# the rest: pip can never replace a package under the stub's running build (nor torch).
$(TOOLS): requirements.txt | $(PY)
	$(PIP) torch==$(TORCH) $(BUILD_TOOLS)
	$(PY) -m pip freeze --exclude-editable > $(VENV)/tools-constraint.txt
	touch $@

# Another torch: the other requirements without requirements.txt's torch line.
$(DEPS): requirements.txt $(TOOLS)
ifeq ($(VENV),.venv)
	$(PIP) -c $(VENV)/tools-constraint.txt -r requirements.txt
else
	grep -v '^torch==' requirements.txt > $(VENV)/requirements-without-torch.txt
	$(PIP) -c $(VENV)/tools-constraint.txt -r $(VENV)/requirements-without-torch.txt
endif
	touch $@

# The stub is named for the torch it is built against (torch_mydev/_C_torch2_13_0*.so), so
# each venv's build sits beside the others' in the one source tree.
# Its build (one core, about 26 s at -O1, the set-up's longest job) runs beside the rest of the
# requirements (about 16 s, mostly one core) and then the bytecode's compile, at the lowest
# priority so that it takes only the core the stub leaves (at equal priority compileall's
# two processes took a third of the stub's). The two pips write disjoint packages: the stub's
# installs torch_mydev alone (--no-deps), after its compile. As pip's own compile, a module
# written for another Python (torch's testing/_internal/py312_intrinsics.py) is skipped: its
# failure does not stop the set-up. Test folders and transformers' model zoo are left out:
# nothing imports most of them, and the suite writes the bytecode of what it does import.
$(BUILT): $(TOOLS) requirements.txt setup.py $(wildcard csrc_stub/*.cpp csrc_stub/*.h csrc_stub/*/*.cpp csrc_stub/*/*.h)
	$(PIP) --no-build-isolation --no-deps -e . & stub=$$!; \
	$(MAKE) --no-print-directory $(DEPS) \
		&& { nice -n 19 $(COMPILE) -x '/tests?/|/transformers/models/' $(SITE_PACKAGES) > /dev/null || true; }; \
	rest=$$?; wait $$stub && exit $$rest
	touch $@

build: $(BUILT)

demo: $(BUILT)
	$(PY) examples/demo.py

# Not -q: pytest's header names the torch under test and the torch the stub was built for;
# the slowest 15 tests are listed at the end. One worker per core (pytest-xdist), a test
# file to a worker: most of a cold run is numba compiling, one core a worker.
# PYTHONDONTWRITEBYTECODE emptied for the suite: each worker would otherwise compile our
# sources and rewrite every test module's asserts again (pytest keeps its rewritten
# modules as bytecode): 4 s a worker, and our sources in each of the suite's subprocesses.
test: $(BUILT)
	PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -n auto --dist loadfile --durations=15

lint: $(DEPS)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

bench: $(BUILT)
	$(PY) benchmarks/run.py

# This torch's venv and stub (torch_mydev/_C_torch2_13_0*.so); other torches' stay.
clean:
	rm -rf $(VENV) build *.egg-info torch_mydev/_C_torch$(subst .,_,$(TORCH)).*so
