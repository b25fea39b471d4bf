"""Shared fixtures: the real bundled model, loaded once per test session."""

from __future__ import annotations

import functools
import os
from contextlib import contextmanager
from dataclasses import dataclass

import pytest
import torch

from hypothesis import settings

from minisgl.model_loader.loader import load_model_config, load_tokenizer, resolve_model

# Hypothesis draws the same examples on every run and machine and keeps no example database, so a test
# passes or fails the same way in any order and on a clean clone (a failure prints the example to replay)
settings.register_profile("minisgl", derandomize=True, database=None, deadline=None)
settings.load_profile("minisgl")

# ---- three workers ------------------------------------------------------------------------------------
# `make test` runs the suite on three pytest-xdist workers (--dist loadgroup). Each worker is its own process
# with its own session fixtures. What every worker may need and is worth making once per run (the scenario
# runs, the course cache, the lesson site) is made by `made_once`: the first worker to ask makes it while the
# others wait, then all read it. What cannot travel between processes (a loaded model, a running server) is
# kept on one worker instead: a module goes to the group of the first such fixture any of its tests uses, else
# it is a group of its own (so a module-scoped fixture is built once). The shared groups and the long modules
# go first; the small modules fill the rest of the workers' time.
SHARED_GROUPS = [
    # transformers' float32 model and its greedy answers (the one server test that also compares logprobs
    # with transformers' starts its own session server there)
    ("transformers", {"hf_model_fp32", "hf_answers"}),
    # the session's `minisgl serve`
    ("server", {"server"}),
]
# modules of about a minute or more (measured with --durations), started before the rest so none of them is
# left for the end (`make test` passes --no-loadscope-reorder, which keeps this order). The lesson site comes
# first: the worker that builds it makes every scenario run, the changed runs and the site at the start, so
# no other module waits for them later. The rest, longest first; those that read the built site last.
LONG_MODULES = [
    "tests/lessons/test_site.py",
    "tests/labs/test_bugs.py",
    "tests/scheduler/test_equivalence.py",
    "tests/scheduler/test_ngram_spec.py",
    "tests/scenarios/test_scenarios.py",
    "tests/labs/test_catalog.py",
    "tests/tui/test_snapshots.py",
    "tests/labs/test_cli.py",
    "tests/distributed/test_tensor_parallel.py",
    "tests/labs/test_mutants.py",
    "tests/kernels/test_build_and_runner.py",
    "tests/tui/test_dashboard.py",
    "tests/tui/test_app_panes.py",
    "tests/scheduler/test_overlap.py",
    "tests/scheduler/test_lifecycle.py",
    "tests/scheduler/test_random_workloads.py",
    "tests/server/test_router.py",
    "tests/server/test_pd_faults.py",
    "tests/lessons/test_browser.py",
    "tests/lessons/test_figures.py",
]

if os.environ.get("PYTEST_XDIST_WORKER"):
    # one torch thread per worker: the workers share two cores, and an OpenMP thread that spins at every
    # barrier while another worker holds the core makes both much slower; subprocesses inherit it
    os.environ["OMP_NUM_THREADS"] = "1"
    torch.set_num_threads(1)


def pytest_addoption(parser):
    parser.addoption("--file-order", default="", metavar="reverse|random:SEED",
                     help="run the test files in reversed or shuffled order (tests keep their order within a "
                          "file): a check that no file relies on another having run first")


def _reorder_files(order: str, items) -> None:
    import random

    files = list(dict.fromkeys(item.nodeid.split("::")[0] for item in items))
    if order == "reverse":
        files.reverse()
    elif order.startswith("random:"):
        random.Random(order.partition(":")[2]).shuffle(files)
    else:
        raise pytest.UsageError(f"--file-order takes reverse or random:SEED, not {order!r}")
    rank = {f: i for i, f in enumerate(files)}
    items.sort(key=lambda item: rank[item.nodeid.split("::")[0]])


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    if config.getoption("file_order"):
        _reorder_files(config.getoption("file_order"), items)
    if not config.getoption("loadgroup", False):  # set on each worker when the run is --dist loadgroup
        return
    modules: dict[str, str] = {}  # module -> its group: the best-ranked shared group any of its tests uses
    for item in items:
        module = item.nodeid.split("::")[0]
        group = next((name for name, fixtures in SHARED_GROUPS if fixtures & set(item.fixturenames)), module)
        if _rank(group) < _rank(modules.setdefault(module, module)):
            modules[module] = group
    for item in items:
        item.add_marker(pytest.mark.xdist_group(modules[item.nodeid.split("::")[0]]))
    items.sort(key=lambda item: _rank(modules[item.nodeid.split("::")[0]]))  # stable: file order kept within


def _rank(group: str) -> int:
    names = [name for name, _ in SHARED_GROUPS] + LONG_MODULES
    return names.index(group) if group in names else len(names)


def made_once(tmp_path_factory, name: str, make):
    """(folder, value): `make(folder)` run once per test run, whichever worker asks first; the others wait on
    its lock and get the same folder and (pickled) value. A skip while making is remembered and repeated."""
    import pickle
    import shutil

    from filelock import FileLock

    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the run's folder, above each worker's own
    shared = root / "made-once"
    shared.mkdir(exist_ok=True)
    folder, done = shared / name, shared / f"{name}.done"
    with FileLock(str(shared / f"{name}.lock")):
        if not done.exists():
            if folder.exists():  # a worker that failed to make it: start again
                shutil.rmtree(folder)
            folder.mkdir()
            try:
                record = ("made", make(folder))
            except pytest.skip.Exception as e:
                record = ("skip", e.msg)
            done.write_bytes(pickle.dumps(record))
    kind, value = pickle.loads(done.read_bytes())
    if kind == "skip":
        pytest.skip(value)
    return folder, value


CHAT_PROMPTS = [
    "What is the capital of China?",
    "Write a haiku about the sea.",
    "Explain what a KV cache is in one sentence.",
    "List three prime numbers.",
    "Who wrote Romeo and Juliet? Answer briefly, then tell me one more play by the same author.",
]


@pytest.fixture(scope="session")
def bundled_source():
    return resolve_model(None)


@pytest.fixture(scope="session")
def model_config(bundled_source):
    return load_model_config(bundled_source)


@pytest.fixture(scope="session")
def tokenizer(bundled_source):
    return load_tokenizer(bundled_source)


@pytest.fixture(scope="session")
def chat_prompt_ids(tokenizer):
    return [
        list(tokenizer.apply_chat_template([{"role": "user", "content": p}], add_generation_prompt=True,
                                           tokenize=True, return_dict=False))
        for p in CHAT_PROMPTS
    ]


@pytest.fixture(scope="session")
def hf_model_fp32(bundled_source):
    """transformers' own Llama on the same GGUF weights: the outside referee for greedy tokens."""
    from transformers import AutoModelForCausalLM

    with _gguf_parsed_once():
        model = AutoModelForCausalLM.from_pretrained(
            str(bundled_source.path.parent), gguf_file=bundled_source.path.name, dtype=torch.float32
        )
    model.generation_config.eos_token_id = None  # run every request the full length
    model.generation_config.pad_token_id = 2
    return model.eval()


@contextmanager
def _gguf_parsed_once():
    """Speed only, results unchanged: transformers parses the GGUF file's metadata twice (config, then
    weights) and builds gguf's tensor-name map once per tensor, about half of its load time here. While
    the referee loads, both are made once and reused; its own dequantizing and name mapping still run."""
    import gguf

    reader_cls, name_map = gguf.GGUFReader, gguf.get_tensor_name_map
    readers: dict[tuple, object] = {}

    def reader(path, *args, **kwargs):
        key = (str(path), args, tuple(sorted(kwargs.items())))
        if key not in readers:
            readers[key] = reader_cls(path, *args, **kwargs)
        return readers[key]

    gguf.GGUFReader, gguf.get_tensor_name_map = reader, functools.lru_cache(maxsize=None)(name_map)
    try:
        yield
    finally:
        gguf.GGUFReader, gguf.get_tensor_name_map = reader_cls, name_map


NEW_TOKENS = 32  # greedy tokens compared with transformers' for each chat prompt


@pytest.fixture(scope="session")
def hf_answers(hf_model_fp32, chat_prompt_ids) -> list[list[int]]:
    """The referee's answers: transformers' greedy tokens for each chat prompt, computed once."""
    answers = []
    for prompt in chat_prompt_ids:
        ids = torch.tensor([prompt])
        with torch.inference_mode():
            # an explicit mask: the prompt contains token 2, which is also the pad id
            out = hf_model_fp32.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=NEW_TOKENS,
                                         do_sample=False)
        answers.append(out[0, len(prompt):].tolist())
    return answers


@pytest.fixture(scope="session")
def base_engine():
    """One float32 Engine on the bundled model for the whole session; tests `fork()` it with their own flags
    (a fork shares the loaded weights, so no test reloads them)."""
    import minisgl

    engine = minisgl.Engine(dtype="float32", max_total_tokens=4096, max_running_requests=32)
    yield engine
    engine.shutdown()


@pytest.fixture(scope="session")
def runner_fp32(base_engine, bundled_source, model_config):
    """A float32 ModelRunner of its own (pools, attention backend) on the base Engine's loaded weights."""
    from minisgl.model_executor.model_runner import ModelRunner
    from minisgl.server_args import ServerArgs

    return ModelRunner(model_config, bundled_source, ServerArgs(dtype="float32", max_total_tokens=4096,
                                                                max_running_requests=16),
                       model=base_engine.model_runner.model)


@dataclass
class Ran:
    scenario: object  # minisgl.scenarios.base.Scenario
    folder: str
    outcome: object  # minisgl.scenarios.driver.Outcome
    trace: object  # tracer.reader.Trace


@pytest.fixture(scope="session")
def scenario_runs(base_engine, tmp_path_factory):
    """ran(name): the scenario run on the real engine (the offline ones on the worker's shared weights, the
    server ones on a real `minisgl serve`) the first time any test of the run asks for it, on any worker; the
    same run after that."""
    from minisgl.scenarios import get
    from minisgl.scenarios.driver import run
    from minisgl.scenarios.pd_server import NoRouter
    from tracer.reader import load_trace

    runs: dict[str, Ran] = {}

    def make(sc, folder):
        try:
            return run(sc, str(folder), loaded=base_engine)
        except NoRouter as e:  # pd_disaggregation without .venv-router
            pytest.skip(str(e))

    def ran(name: str) -> Ran:
        if name not in runs:
            sc = get(name)
            folder, outcome = made_once(tmp_path_factory, f"scenario-{name}", lambda f: make(sc, f))
            runs[name] = Ran(sc, str(folder), outcome, load_trace(str(folder)))
        return runs[name]

    return ran
