"""`minisgl serve --tokenizer-worker-num 2`: two HTTP processes on one port, each with its own
TokenizerManager. Requests reach both; every answer (tokens, control replies) comes back to the worker that
asked; the trace names the worker and passes `trace check`; SIGTERM drains both and leaves nothing; a dead
scheduler, or a dead main process, ends every worker's requests with 503 and leaves no process behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.server.conftest import ENV, ServeProcess, wait_drained

CLI = [sys.executable, "-m", "minisgl.cli"]
# the default bfloat16 path with the GGUF kernel at every row count: a row's result there never depends on
# its batch, so sixteen concurrent copies of one greedy request get one answer however they are batched (from
# --dequant-gemm-rows on, a batch's rows would be the GEMM's, and a near-tie could round two ways)
FLAGS = ["--tokenizer-worker-num", "2", "--max-total-tokens", "2048", "--context-length", "1024",
         "--log-level", "warning", "--dequant-gemm-rows", "off"]
# four of them fit the KV cache together (4 x 405 < 2048 slots), so all four run at once
LONG = {"prompt": "Once upon a time", "max_tokens": 400, "ignore_eos": True, "temperature": 0}
WORKERS = {"tokenizer_worker0", "tokenizer_worker1"}


def _worker_of(health: dict) -> str:
    """The /health answer names the worker that gave it (its pids list that one worker)."""
    (name,) = WORKERS & set(health["pids"])
    return name


def _until_both_workers(url: str, path: str, method: str = "GET") -> dict[str, int]:
    """Send concurrent requests on fresh connections until each worker answered one; their status codes."""
    seen: dict[str, int] = {}
    deadline = time.monotonic() + 120
    while len(seen) < 2:
        assert time.monotonic() < deadline, f"one worker never answered {path}: {seen}"

        def one(_: int) -> tuple[str, int]:
            resp = httpx.request(method, url + path, timeout=60)
            return _worker_of(httpx.get(url + "/health", timeout=60).json()), resp.status_code

        with ThreadPoolExecutor(8) as pool:
            for name, status in pool.map(one, range(8)):
                seen.setdefault(name, status)
    return seen


@pytest.fixture(scope="module")
def workers_server(tmp_path_factory):
    trace_dir = tmp_path_factory.mktemp("workers-trace")
    srv = ServeProcess([*FLAGS, "--trace", str(trace_dir)]).wait_ready()
    yield srv
    # SIGTERM reaches both workers through the main process: each drains, then everything exits, status 0
    code = srv.stop(signal.SIGTERM)
    assert code == 0, srv.output()[-3000:]
    assert srv.alive_descendants() == []
    assert srv.ipc_dir and not Path(srv.ipc_dir).exists()
    assert srv.output().count("SIGTERM: shutting down") == 2  # one line from each worker


def test_both_workers_serve_and_get_their_own_answers(workers_server):
    srv = workers_server
    assert WORKERS <= set(srv.pids)  # the ready line names each worker's pid
    assert set(_until_both_workers(srv.url, "/health").values()) == {200}
    assert set(_until_both_workers(srv.url, "/flush_cache", "POST").values()) == {200}
    body = {"messages": [{"role": "user", "content": "Name three colors."}], "max_tokens": 12,
            "temperature": 0}

    def chat(i: int) -> str:
        if i % 2:
            with httpx.stream("POST", f"{srv.url}/v1/chat/completions", json={**body, "stream": True},
                              timeout=120) as resp:
                lines = [line[6:] for line in resp.iter_lines() if line.startswith("data: {")]
            return "".join(json.loads(x)["choices"][0]["delta"].get("content") or "" for x in lines)
        resp = httpx.post(f"{srv.url}/v1/chat/completions", json=body, timeout=120)
        assert resp.status_code == 200, resp.text
        return resp.json()["choices"][0]["message"]["content"]

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(chat, range(16)))
    assert len(set(answers)) == 1 and answers[0]  # greedy: one answer, whichever worker carried it
    wait_drained(httpx.Client(base_url=srv.url, timeout=60))


def test_the_trace_names_the_worker_of_each_request(workers_server):
    srv = workers_server
    body = {"prompt": "The capital of France is", "max_tokens": 4, "temperature": 0}
    with ThreadPoolExecutor(8) as pool:
        assert set(pool.map(lambda _: httpx.post(f"{srv.url}/v1/completions", json=body,
                                                 timeout=120).status_code, range(8))) == {200}
    wait_drained(httpx.Client(base_url=srv.url, timeout=60))
    from tracer.diagrams.lifecycle import lifecycle_view
    from tracer.reader import load_trace

    trace = load_trace(srv.trace_dir)
    tm_files = [p for p in trace.processes() if p.proc == "tokenizer_manager"]
    assert {p.pid for p in tm_files} == {srv.pids[w] for w in WORKERS}  # a file per worker
    received = [e for e in trace.events if e.name == "http.request_received"]
    assert {e.get("tokenizer_worker") for e in received} <= {0, 1}
    for e in received:  # each worker traces only what it took
        assert e.pid == srv.pids[f"tokenizer_worker{e.get('tokenizer_worker')}"]
    graph = lifecycle_view(trace, received[-1].rid)
    titles = [c.label for c in graph.clusters]
    assert any(f"tokenizer_worker{received[-1].get('tokenizer_worker')}" in t for t in titles), titles
    check = subprocess.run([*CLI, "trace", "check", srv.trace_dir], capture_output=True, text=True, env=ENV,
                           timeout=120, check=False)
    assert check.returncode == 0, check.stdout + check.stderr


def _stream_until_error(url: str, out: list, started: threading.Event) -> None:
    with httpx.stream("POST", f"{url}/v1/completions", json={**LONG, "stream": True}, timeout=120) as resp:
        for line in resp.iter_lines():
            if line:
                out.append(line)
                started.set()


@pytest.mark.parametrize("victim", ["scheduler", "main"])
def test_a_death_ends_every_workers_requests_and_leaves_no_process(victim):
    """SIGKILL of the scheduler (the main process tells every worker) or of the main process itself (each
    worker sees its pipe close): the streams running on the workers end with an error event naming the
    death and [DONE]; no process of the server is left, whichever died."""
    srv = ServeProcess(FLAGS).wait_ready()
    try:
        streams = [[] for _ in range(4)]
        started = [threading.Event() for _ in streams]
        threads = [threading.Thread(target=_stream_until_error, args=(srv.url, out, ev))
                   for out, ev in zip(streams, started)]
        for t in threads:
            t.start()
        assert all(ev.wait(120) for ev in started), "a stream never started"
        os.kill(srv.pids["scheduler"] if victim == "scheduler" else srv.proc.pid, signal.SIGKILL)
        for t in threads:
            t.join(120)
        assert not any(t.is_alive() for t in threads), "a stream hung after the death"
        want = "scheduler process died" if victim == "scheduler" else "the main process died"
        for lines in streams:
            assert lines[-1] == "data: [DONE]", lines[-3:]
            assert "error" in json.loads(lines[-2][6:]), lines[-3:]
            assert want in json.loads(lines[-2][6:])["error"]["message"]
        code = srv.proc.wait(60)
        assert code == (1 if victim == "scheduler" else -signal.SIGKILL)
        assert srv.alive_descendants(within=30) == []
        assert not Path(srv.ipc_dir).exists()
    finally:
        srv.stop(signal.SIGKILL)


def test_flags_that_do_not_go_with_workers_are_refused():
    from minisgl.server.http_server_args import HttpServerArgs

    with pytest.raises(ValueError, match="--enable-metrics"):
        HttpServerArgs(tokenizer_worker_num=2, enable_metrics=True).validate()
    with pytest.raises(ValueError, match="--disaggregation-mode prefill"):
        HttpServerArgs(tokenizer_worker_num=2).validate("prefill")
    HttpServerArgs(tokenizer_worker_num=2).validate()
    out = subprocess.run([*CLI, "serve", "--tokenizer-worker-num", "0"], capture_output=True, text=True,
                         env=ENV, timeout=120, check=False)
    assert out.returncode == 2 and "must be at least 1" in out.stderr
