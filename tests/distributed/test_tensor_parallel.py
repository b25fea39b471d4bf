"""Tensor parallelism on the real model: --tp-size 3 on gloo (cpu) against --tp-size 1.

SmolLM2-135M has 9 query heads and 3 key/value heads: 3 is the only size > 1 that divides both (2 is
refused, see test_parallel_layers.py). Each rank is a real process; the served test runs a real
`minisgl serve --tp-size 3` (one scheduler process per rank, rank 0 broadcasting its inputs).
"""

from __future__ import annotations

import asyncio
import signal
import socket
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.slow

TP = 3
NEW_TOKENS = 16


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_served_tp3_equals_tp1_and_its_trace_checks(base_engine, runner_fp32, chat_prompt_ids, tmp_path):
    """The chat prompts' float32 greedy tokens through `minisgl serve --tp-size 3` (sent at once, so they
    share batches) equal tp=1's, and a chat completion gives tp=1's text."""
    from concurrent.futures import ThreadPoolExecutor

    import httpx
    from openai import OpenAI

    from minisgl.model_executor.static_generate import greedy_generate
    from tests.server.conftest import ENGINE_FLAGS, OneThreadEngine, ServeProcess, serve_flags
    from tracer.check import check_trace
    from tracer.reader import load_trace

    messages = [{"role": "user", "content": "What is the capital of France?"}]
    engine = OneThreadEngine(base_engine.fork(**ENGINE_FLAGS))  # tp=1, the server's flags, one thread
    ref = engine.generate(messages, {"max_new_tokens": NEW_TOKENS, "temperature": 0})
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        want = greedy_generate(runner_fp32, chat_prompt_ids, NEW_TOKENS)  # no EOS cut: ignore_eos below
    finally:
        torch.set_num_threads(threads)
    trace_dir = tmp_path / "trace"
    srv = ServeProcess([*serve_flags(ENGINE_FLAGS), "--tp-size", str(TP), "--trace", str(trace_dir),
                        "--log-level", "warning"]).wait_ready()
    try:
        names = [line for line in srv.lines if "ready at" in line][0]
        assert all(f"scheduler_tp{r} pid" in names for r in range(1, TP)), names
        client = OpenAI(base_url=f"{srv.url}/v1", api_key="none", max_retries=0, timeout=300)
        model = client.models.list().data[0].id
        resp = client.chat.completions.create(model=model, messages=messages, temperature=0, max_tokens=NEW_TOKENS)
        assert resp.choices[0].message.content == ref["text"]
        assert resp.usage.completion_tokens == ref["usage"]["completion_tokens"]
        params = {"max_new_tokens": NEW_TOKENS, "temperature": 0, "ignore_eos": True}

        def generate(ids: list[int]) -> list[int]:
            r = httpx.post(f"{srv.url}/generate", json={"input_ids": ids, "sampling_params": params}, timeout=300)
            return r.json()["output_ids"]

        with ThreadPoolExecutor(len(chat_prompt_ids)) as pool:
            assert list(pool.map(generate, chat_prompt_ids)) == want
    finally:
        code = srv.stop(signal.SIGINT)
    assert code == 0, srv.output()[-3000:]
    assert srv.alive_descendants() == []  # every rank, the detokenizer and the resource tracker are gone
    assert srv.ipc_dir and not Path(srv.ipc_dir).exists()

    trace = load_trace(trace_dir)
    assert sorted(trace.tp_rank_events) == [f"scheduler_tp{r}" for r in range(1, TP)]
    assert check_trace(trace) == []
    forwards = [ev for ev in trace.events if ev.name == "model.forward" and ev.ph == "E"]
    assert forwards and all(ev.get("tp_size") == TP and ev.get("all_reduce") > 0 for ev in forwards)
    asyncio.run(_open_replay(trace))  # the replay app opens it (it shows rank 0's scheduler, as for one rank)


async def _open_replay(trace) -> None:
    from tui.app import ReplayApp

    app = ReplayApp(trace)
    async with app.run_test(size=(100, 40)) as pilot:
        await pilot.pause()
        await pilot.press("end")
        assert app.timeline.cursor == len(trace.events) - 1


def test_three_nodes_on_localhost_serve_like_one(base_engine, tmp_path):
    """--nnodes 3: node 0 serves HTTP with rank 0; nodes 1 and 2 run only ranks 1 and 2 and meet it at
    --dist-init-addr. The same greedy text as tp=1, one trace folder for all, nothing left running."""
    import subprocess
    import sys

    import httpx
    import psutil

    from tests.server.conftest import ENGINE_FLAGS, ENV, OneThreadEngine, ServeProcess, serve_flags
    from tracer.check import check_trace
    from tracer.reader import load_trace

    ref = OneThreadEngine(base_engine.fork(**ENGINE_FLAGS)).generate("The capital of France is",
                                                                      {"max_new_tokens": 8, "temperature": 0})
    trace_dir = tmp_path / "trace"
    common = [*serve_flags(ENGINE_FLAGS), "--tp-size", str(TP), "--nnodes", str(TP),
              "--dist-init-addr", f"127.0.0.1:{_free_port()}", "--trace", str(trace_dir), "--log-level", "warning"]
    workers = [subprocess.Popen([sys.executable, "-m", "minisgl.cli", "serve", *common, "--node-rank", str(k)],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ENV)
               for k in range(1, TP)]
    srv = ServeProcess([*common, "--node-rank", "0"])
    try:
        srv.wait_ready()
        kids = [c for w in workers for c in psutil.Process(w.pid).children(recursive=True)]
        r = httpx.post(f"{srv.url}/generate", json={"text": "The capital of France is",
                                                   "sampling_params": {"max_new_tokens": 8, "temperature": 0}},
                       timeout=300)
        assert r.json()["text"] == ref["text"]
    finally:
        code = srv.stop(signal.SIGINT)
        outs = [_end_worker(w) for w in workers]
    assert code == 0, srv.output()[-3000:]
    # node 0 gone, the other nodes' ranks lose their peer and end: each node says so and exits 1
    assert all(w.returncode == 1 and "scheduler_tp" in out and "died" in out for w, out in zip(workers, outs)), outs
    assert all(f"node {k} of {TP}: starting scheduler ranks {k}" in out for k, out in enumerate(outs, 1)), outs
    assert srv.alive_descendants() == []
    # the other nodes' own children (their ranks, torch's resource tracker) end by themselves; one may still
    # be exiting when its node's process has already returned, so give them a bounded moment
    _, alive = psutil.wait_procs(kids, timeout=30)
    assert not [p for p in alive if p.is_running() and p.status() != psutil.STATUS_ZOMBIE], alive
    trace = load_trace(trace_dir)
    assert sorted(trace.tp_rank_events) == [f"scheduler_tp{r}" for r in range(1, TP)]
    assert check_trace(trace) == []


def _end_worker(proc) -> str:
    """A worker node's output once it ended on its own (after node 0 stopped), or after a SIGINT."""
    import subprocess

    try:
        return proc.communicate(timeout=60)[0]
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)
        return proc.communicate(timeout=60)[0] + "\n(ended only after SIGINT)"
