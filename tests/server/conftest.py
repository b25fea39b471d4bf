"""Server fixtures: one real `minisgl serve` subprocess shared by the session (float32, traced, with an API
key and /metrics), and the offline Engine with the same flags (a fork of the session's base Engine), whose
greedy answers the server must reproduce."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import psutil
import pytest

API_KEY = "sk-minisgl-test"
AUTH = {"Authorization": f"Bearer {API_KEY}"}
# small KV cache and context: little memory, and a too-long prompt is cheap to build
ENGINE_FLAGS = {"dtype": "float32", "max_total_tokens": 4096, "context_length": 1024, "max_running_requests": 40}
# One torch thread in the server: on a 2-core machine shared with other jobs, a second OpenMP thread that
# spins at every barrier makes decoding about 10x slower. The Engine fixture uses one thread too.
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}


def serve_flags(flags: dict) -> list[str]:
    return [part for key, value in flags.items() for part in (f"--{key.replace('_', '-')}", str(value))]


class ServeProcess:
    """`minisgl serve --port 0` in a subprocess; its output is read on a thread (so the pipe never fills)."""

    def __init__(self, args: list[str]):
        cmd = [sys.executable, "-m", "minisgl.cli", "serve", "--port", "0", *args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ENV)
        self.lines: list[str] = []
        self.url = self.ipc_dir = self.trace_dir = None
        self.pids: dict[str, int] = {}
        self.descendants: list[psutil.Process] = []
        self._ready = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
            if m := re.search(r"sockets in (\S+)\)", line):
                self.ipc_dir = m.group(1)
            if m := re.search(r"tracing to (.+) \(level", line):
                self.trace_dir = m.group(1)
            if m := re.search(r"ready at (http://\S+) \(model [^;]+; (.*)\)", line):  # every process's pid
                self.pids = {name: int(pid) for name, pid in re.findall(r"(\w+) pid (\d+)", m.group(2))}
                self.url = m.group(1)
                self._ready.set()
        self._ready.set()

    def wait_ready(self, timeout: float = 600) -> ServeProcess:
        self._ready.wait(timeout)
        if self.url is None:
            self.stop(signal.SIGKILL)
            raise RuntimeError("minisgl serve did not become ready:\n" + self.output())
        # every process the server started (scheduler, detokenizer, multiprocessing's resource tracker)
        self.descendants = psutil.Process(self.proc.pid).children(recursive=True)
        return self

    def output(self) -> str:
        return "\n".join(self.lines)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()

    def alive_descendants(self, within: float = 10.0) -> list[psutil.Process]:
        """Those still running after `within` seconds (a zombie counts as gone)."""
        deadline = time.monotonic() + within
        while True:
            alive = [p for p in self.descendants if _running(p)]
            if not alive or time.monotonic() > deadline:
                return alive
            time.sleep(0.2)


def _running(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def replay_opens_to_the_end(trace) -> None:
    """The replay app opens the trace, and End takes it to the last event."""
    import asyncio

    from tui.app import ReplayApp

    async def run() -> None:
        app = ReplayApp(trace)
        async with app.run_test(size=(100, 40)) as pilot:
            await pilot.pause()
            await pilot.press("end")
            assert app.timeline.cursor == len(trace.events) - 1

    asyncio.run(run())


def wait_drained(http: httpx.Client, timeout: float = 60) -> dict:
    """Poll /health until nothing runs or waits and every KV slot is free or cached; return the load."""
    deadline = time.monotonic() + timeout
    while True:
        load = http.get("/health").json()["load"]
        idle = load["num_running_reqs"] == 0 and load["num_waiting_reqs"] == 0
        if idle and load["free_slots"] + load["cached_slots"] == load["total_slots"]:
            return load
        if time.monotonic() > deadline:
            raise AssertionError(f"the server did not drain within {timeout} s: {load}")
        time.sleep(0.1)


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    trace_dir = tmp_path_factory.mktemp("server-trace")
    srv = ServeProcess([*serve_flags(ENGINE_FLAGS), "--api-key", API_KEY, "--trace", str(trace_dir),
                        "--log-level", "warning", "--enable-metrics", "--tool-call-parser", "qwen25",
                        "--reasoning-parser", "qwen3"]).wait_ready()
    yield srv
    # a clean stop, as after Ctrl-C: exit status 0, no child left, the socket folder gone
    code = srv.stop(signal.SIGINT)
    assert code == 0, srv.output()[-3000:]
    assert srv.alive_descendants() == []
    assert srv.ipc_dir and not Path(srv.ipc_dir).exists()


@pytest.fixture(scope="session")
def http(server):
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=300) as client:
        yield client


@pytest.fixture(scope="session")
def client(server):
    from openai import OpenAI

    return OpenAI(base_url=f"{server.url}/v1", api_key=API_KEY, max_retries=0, timeout=300)


@pytest.fixture(scope="session")
def model(client) -> str:
    return client.models.list().data[0].id


class OneThreadEngine:
    """The offline Engine, run with one torch thread like the server, so both compute the same way; the
    thread count of the test process is restored after each call."""

    def __init__(self, engine):
        self.engine = engine
        self.tokenizer = engine.tokenizer

    def generate(self, *args, **kwargs):
        import torch

        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            return self.engine.generate(*args, **kwargs)
        finally:
            torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def engine(base_engine) -> OneThreadEngine:
    """The session's float32 Engine forked with the server's flags: the same weights, no second load (fork
    refuses a dtype other than the base Engine's, so ENGINE_FLAGS' float32 is checked, not assumed)."""
    return OneThreadEngine(base_engine.fork(**ENGINE_FLAGS))
