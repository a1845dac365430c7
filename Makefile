# `make demo` and `make test` each create or refresh .venv, then run.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# test: every test on every backend this machine has (pocl gives a CPU OpenCL device; mpi
# runs the data-parallel tests on two MPI ranks)
EXTRAS ?= test,pocl,mpi

.PHONY: demo test bench lint clean

$(VENV)/.stamp-$(EXTRAS): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip setuptools wheel
	$(BIN)/python -m pip install --quiet -e ".[$(EXTRAS)]"
	@rm -f $(VENV)/.stamp-*
	@touch $@

demo: $(VENV)/.stamp-$(EXTRAS)
	$(BIN)/ndlite info
	# the seed CNN on the MNIST subset bundled with ndlite: >= 95% test accuracy in minutes
	NDLITE_BACKEND=numpy $(BIN)/ndlite train mnist --subset --epochs 4

test: $(VENV)/.stamp-$(EXTRAS)
	@$(BIN)/python tools/opencl_cpu.py
	@$(BIN)/python tools/size_report.py
	CI=$${CI:-} $(BIN)/python -m pytest -q

bench: EXTRAS = test,pocl,bench
bench: $(VENV)/.stamp-$(EXTRAS)
	$(BIN)/python bench/overhead.py

lint: EXTRAS = dev,pocl
lint: $(VENV)/.stamp-$(EXTRAS)
	$(BIN)/ruff check ndlite backends tests bench

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
