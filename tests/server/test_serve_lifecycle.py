"""`minisgl serve` as a process: its help, a clear exit on a missing model, and what happens when the
scheduler process is killed: waiting clients get 503 at once, serve exits non-zero, no child is left.

(The clean stop after Ctrl-C is checked when the shared server of the session is stopped.)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import psutil

from tests.server.conftest import ENV, ServeProcess

CLI = [sys.executable, "-m", "minisgl.cli"]
LONG = {"prompt": "Once upon a time", "max_tokens": 900, "ignore_eos": True, "temperature": 0}


def test_serve_help_lists_the_server_flags():
    out = subprocess.run([*CLI, "serve", "--help"], capture_output=True, text=True, env=ENV, timeout=120,
                         check=False)
    assert out.returncode == 0
    for flag in ("--host", "--port", "--model", "--api-key", "--log-level", "--served-model-name", "--trace",
                 "--trace-level", "--max-total-tokens", "--dtype", "--graceful-shutdown-timeout",
                 "--enable-metrics"):
        assert flag in out.stdout


def test_missing_model_is_one_line_and_exit_status_2(tmp_path):
    missing = tmp_path / "nope.gguf"
    out = subprocess.run([*CLI, "serve", "--model", str(missing), "--port", "0"], capture_output=True,
                         text=True, env=ENV, timeout=120, check=False)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "model not found" in lines[0] and "Traceback" not in out.stderr


def _both_arrived(load: dict) -> bool:
    return load["num_running_reqs"] >= 1 and load["num_running_reqs"] + load["num_waiting_reqs"] == 2


def _dead(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_killed_scheduler_fails_requests_with_503_and_serve_exits_nonzero():
    """Two 900-token requests are in the scheduler when it is SIGKILLed. In this order: the scheduler is dead,
    then the request not yet answered gets a 503 naming that death (the watchdog's, not the one a timeout
    gives, which says "did not answer within"), and the streamed one (its 200 already sent) ends with that
    error and [DONE]; neither hangs. Only then does serve, by itself, exit non-zero, leaving no child and no
    socket folder. An HTTP answer is itself the proof that serve was still up when it answered; a request
    left unanswered would be cut off by serve's shutdown with no 503 at all."""
    srv = ServeProcess(["--max-total-tokens", "2048", "--context-length", "1024", "--log-level", "warning"])
    srv.wait_ready()
    scheduler = srv.pids["scheduler"]
    results: dict[str, object] = {}
    streaming_started = threading.Event()
    try:
        with httpx.Client(base_url=srv.url, timeout=120) as http:

            def non_streaming() -> None:
                resp = httpx.post(f"{srv.url}/v1/completions", json=LONG, timeout=120)
                # the moment the answer is in: is the scheduler already dead?
                results["plain"] = (resp.status_code, resp.json(), _dead(scheduler))

            def streaming() -> None:
                with httpx.stream("POST", f"{srv.url}/v1/completions", json={**LONG, "stream": True},
                                  timeout=120) as resp:
                    lines = []
                    for line in resp.iter_lines():
                        if line:
                            lines.append(line)
                            streaming_started.set()
                    results["stream"] = (resp.status_code, lines, _dead(scheduler))

            threads = [threading.Thread(target=f) for f in (non_streaming, streaming)]
            threads[1].start()  # the streaming one first: it must be running, so its 200 is already sent
            threads[0].start()
            deadline = time.monotonic() + 120
            while not (streaming_started.is_set() and _both_arrived(http.get("/health").json()["load"])):
                assert time.monotonic() < deadline, "the two requests never reached the scheduler"
                time.sleep(0.1)
            assert "plain" not in results and "stream" not in results  # both still waiting for tokens
            os.kill(scheduler, signal.SIGKILL)
            # The joins and the clients' 120 s timeouts only bound a hang (so that it fails the test rather
            # than blocking it); they assert nothing about speed. What shows the 503 came from the death and
            # not from a timeout is its message, and that it came from a serve process still up (below).
            for t in threads:
                t.join(180)
            assert not any(t.is_alive() for t in threads), "a request hung after the scheduler died"
            assert "plain" in results and "stream" in results, "a client got no HTTP answer"

            status, body, scheduler_dead = results["plain"]
            assert scheduler_dead  # the answer came after the death, not before it
            assert status == 503 and "scheduler process died" in body["error"]["message"]
            assert "SIGKILL" in body["error"]["message"]
            status, lines, scheduler_dead = results["stream"]  # already 200: the error is in the stream
            assert scheduler_dead and status == 200 and lines[-1] == "data: [DONE]"
            assert "scheduler process died" in json.loads(lines[-2][6:])["error"]["message"]
            try:
                late = http.post("/v1/completions", json=LONG)
                assert late.status_code == 503
            except httpx.TransportError:
                pass  # the port already closed
        # serve exits on its own (nothing has signalled it): non-zero, after having answered both requests
        code = srv.proc.wait(60)
        assert code != 0
        assert "failing every request with 503 and shutting down" in srv.output()
        assert "scheduler process died (killed by SIGKILL)" in srv.output()
        assert srv.alive_descendants() == []
        assert not Path(srv.ipc_dir).exists()
    finally:
        srv.stop(signal.SIGKILL)


ORPHAN_SCRIPT = """
import multiprocessing as mp, sys, time
from pathlib import Path
from minisgl.server.child_process import setup_child_process

def child(ipc_dir):
    setup_child_process("scheduler", "warning", None, 2, ipc_dir)
    (Path(ipc_dir) / "child-ready").touch()
    while True:
        time.sleep(1)

if __name__ == "__main__":
    proc = mp.get_context("spawn").Process(target=child, args=(sys.argv[1],))
    proc.start()
    print(proc.pid, flush=True)
    time.sleep(600)
"""


def test_a_child_whose_parent_was_killed_exits_and_removes_the_sockets(tmp_path):
    """SIGKILL gives the main process no chance to clean up: each child notices it lost its parent.
    (The same setup_child_process as the scheduler and detokenizer, without loading a model.)"""
    script, ipc_dir = tmp_path / "parent.py", tmp_path / "ipc"
    script.write_text(ORPHAN_SCRIPT)
    ipc_dir.mkdir()
    parent = subprocess.Popen([sys.executable, str(script), str(ipc_dir)], stdout=subprocess.PIPE, text=True,
                              env=ENV, cwd=Path(__file__).resolve().parents[2])
    try:
        child = psutil.Process(int(parent.stdout.readline()))
        deadline = time.monotonic() + 60
        while not (ipc_dir / "child-ready").exists():
            assert time.monotonic() < deadline and parent.poll() is None, "the child never started"
            time.sleep(0.1)
        parent.kill()
        parent.wait(10)
        child.wait(15)  # raises TimeoutExpired if the orphan lives on
        assert not ipc_dir.exists()
    finally:
        parent.kill()


def _stream(url: str, body: dict, out: dict, name: str, first_chunk: threading.Event | None = None) -> None:
    with httpx.stream("POST", f"{url}/v1/completions", json={**body, "stream": True}, timeout=120) as resp:
        lines = []
        for line in resp.iter_lines():
            if line:
                lines.append(line)
                if first_chunk is not None:
                    first_chunk.set()
        out[name] = (resp.status_code, lines)


def _events(lines: list[str]) -> list[dict]:
    return [json.loads(line[6:]) for line in lines if line.startswith("data: {")]


def test_sigterm_lets_running_requests_finish_within_the_grace_period_then_ends_the_rest(tmp_path):
    """SIGTERM with --graceful-shutdown-timeout 4 while three requests run. A short stream finishes within the
    grace period as usual (finish_reason, [DONE]); a long stream and a long non-streaming request outlast it:
    the stream gets an OpenAI error event and [DONE], the other a 503. A request sent during the grace period is
    refused with 503 (and /health says 503). Then serve exits 0 on its own, leaving no child, no socket folder,
    and a trace that `minisgl trace check` passes: every request finished in the scheduler, every KV slot
    returned. (The server has no --enable-metrics: /metrics is 404.)"""
    trace_dir = tmp_path / "trace"
    srv = ServeProcess(["--max-total-tokens", "4096", "--context-length", "2048", "--log-level", "warning",
                        "--graceful-shutdown-timeout", "4", "--trace", str(trace_dir)]).wait_ready()
    long = {**LONG, "max_tokens": 1900}  # a CPU decodes nowhere near 1900 tokens in the 4 s of grace
    results: dict[str, object] = {}
    long_started, short_started = threading.Event(), threading.Event()
    try:
        assert httpx.get(f"{srv.url}/metrics").status_code == 404

        def plain() -> None:
            resp = httpx.post(f"{srv.url}/v1/completions", json=long, timeout=120)
            results["plain"] = (resp.status_code, resp.json())

        threads = [threading.Thread(target=_stream, args=(srv.url, long, results, "long", long_started)),
                   threading.Thread(target=plain)]
        for t in threads:
            t.start()
        assert long_started.wait(120), "the long stream never started"
        short = threading.Thread(target=_stream, args=(srv.url, {**LONG, "max_tokens": 4}, results, "short",
                                                        short_started))
        short.start()
        threads.append(short)
        assert short_started.wait(120), "the short stream never started"
        srv.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 60
        while httpx.get(f"{srv.url}/health").status_code != 503:  # the signal was taken: shutting down
            assert time.monotonic() < deadline, "/health never said 503 after SIGTERM"
            time.sleep(0.05)
        late = httpx.post(f"{srv.url}/v1/completions", json={**LONG, "max_tokens": 2}, timeout=30)
        assert late.status_code == 503 and late.json()["error"]["code"] == "server_shutting_down"
        for t in threads:
            t.join(60)
        assert not any(t.is_alive() for t in threads), "a request hung during the shutdown"

        status, lines = results["short"]  # finished within the grace period, as usual
        assert status == 200 and lines[-1] == "data: [DONE]"
        assert _events(lines)[-1]["choices"][0]["finish_reason"] == "length"
        status, lines = results["long"]  # outlasted it: an error event, then [DONE]
        assert status == 200 and lines[-1] == "data: [DONE]"
        events = _events(lines)
        assert len(events) > 1 and "choices" in events[0]
        error = events[-1]["error"]
        assert error["code"] == "server_shutting_down" and error["type"] == "server_error"
        status, body = results["plain"]
        assert status == 503 and body["error"]["code"] == "server_shutting_down"
        assert "grace period" in body["error"]["message"]

        assert srv.proc.wait(30) == 0  # by itself: nothing sent it a second signal
        assert "2 request(s) outlasted the 4 s grace period" in srv.output()
        assert srv.alive_descendants() == []
        assert not Path(srv.ipc_dir).exists()
        check = subprocess.run([*CLI, "trace", "check", str(trace_dir)], capture_output=True, text=True, env=ENV,
                               timeout=120, check=False)
        assert check.returncode == 0, check.stdout + check.stderr
        from tracer.reader import load_trace

        trace = load_trace(str(trace_dir))
        aborted = {e.rid for e in trace.events if e.name == "tm.shutdown_aborted"}
        assert len(aborted) == 2
        for rid in aborted:  # the scheduler let each go: finished as an abort
            finished = [e for e in trace.by_rid(rid) if e.name == "sched.finished"]
            assert finished and finished[0].get("finish_reason")["type"] == "abort"
    finally:
        srv.stop(signal.SIGKILL)
