# Each target creates or refreshes .venv with the extras it needs, then runs.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# test: every test on every backend this machine has (pocl gives a CPU OpenCL device; mpi
# runs the data-parallel tests on two MPI ranks; cpu adds the NumPy backend's numba kernels,
# which its tests check against the pure NumPy path; half adds ml_dtypes for bfloat16)
EXTRAS ?= test,pocl,mpi,cpu,half

.PHONY: demo test bench lint clean

# One stamp per set of extras installed (.venv/.stamp-test,pocl ...); a target names the set it
# needs in its prerequisite, where make expands it at once (a target-specific EXTRAS would not
# reach a prerequisite's name). Extras only add packages, so stamps of other sets stay valid.
$(VENV)/.stamp-%: pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip setuptools wheel
	$(BIN)/python -m pip install --quiet -e ".[$*]"
	@touch $@

demo: $(VENV)/.stamp-$(EXTRAS)
	$(BIN)/ndlite info
	# the seed CNN on the MNIST subset bundled with ndlite: >= 95% test accuracy in minutes
	NDLITE_BACKEND=numpy $(BIN)/ndlite train mnist --subset --epochs 4

test: $(VENV)/.stamp-$(EXTRAS)
	@$(BIN)/python tools/opencl_cpu.py
	@$(BIN)/python tools/size_report.py
	CI=$${CI:-} $(BIN)/python -m pytest -q -n $${PYTEST_WORKERS:-auto}

# the CPU benchmarks; results land in bench/results/ only from complete runs (a run without
# PyTorch, say, writes bench/results/*.partial.json and says what is missing)
bench: $(VENV)/.stamp-test,pocl,bench
	$(BIN)/python bench/overhead.py
	$(BIN)/python bench/crossover.py --backends numpy opencl --out crossover_cpu

lint: $(VENV)/.stamp-dev,pocl
	$(BIN)/ruff check ndlite backends tests bench tools

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
