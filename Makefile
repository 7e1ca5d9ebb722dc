# Two entry points for a fresh clone: `make demo` (the main job) and `make test`.
# Both create .venv on first use. torch is pinned first so pip never pulls the multi-GB CUDA
# build on a CPU machine (this machine's pip resolves torch==2.13.0 to a local CPU wheel).
PYTHON ?= python3
TORCH_SPEC ?= torch==2.13.0
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.warpforge-installed
PYTEST_WORKERS ?= 2

.PHONY: setup demo test test-gpu lint format gpu-check clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q "$(TORCH_SPEC)"
	$(BIN)/python -m pip install -q -e ".[all]"
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(BIN)/warpforge env
	$(BIN)/warpforge bench

test: $(STAMP)
	eval "$$(bash scripts/test_services.sh)" && \
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadfile

lint: $(STAMP)
	$(BIN)/ruff check src tests scripts benchmarks
	$(BIN)/ruff format --check src tests scripts benchmarks

format: $(STAMP)
	$(BIN)/ruff check --fix src tests scripts benchmarks
	$(BIN)/ruff format src tests scripts benchmarks

gpu-check:
	bash scripts/gpu_check.sh

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
