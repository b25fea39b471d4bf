"""minisgl behind SGLang's own router (sglang-router, installed by `make router-env` into .venv-router).

One `minisgl router --workers 2` for the module: two real float32 `minisgl serve` workers behind the router
with round_robin. The openai client talks to the router only; the answers must equal the offline Engine's,
the requests must spread over both workers (read from each worker's trace, where the x-request-id the
router logs is recorded), the router must find every endpoint it asks for (no 404 in its log), cache_aware
and power_of_two must serve too (only the router is started again, over the same workers), a killed
worker must be routed around, and nothing may be left running at the end.
"""

from __future__ import annotations

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

from tests.server.conftest import ENV
from tracer.check import check_trace
from tracer.reader import load_trace

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
ROUTER_PYTHON = ROOT / ".venv-router" / "bin" / "python"
WORKER_FLAGS = ["--dtype", "float32", "--max-total-tokens", "2048", "--context-length", "1024",
                "--log-level", "warning"]
GREEDY = {"max_new_tokens": 12, "temperature": 0}
CHAT = [{"role": "user", "content": "What is the capital of China?"}]
ANSI = re.compile(r"\x1b\[[0-9;]*m")
ROUTER_READY = re.compile(r"minisgl router: ready at http://127\.0\.0\.1:(\d+) ")
READY = re.compile(r"\[worker (\d)\] minisgl serve: ready at (http://\S+) .*scheduler pid (\d+), detokenizer pid (\d+)")


def _router_installed() -> bool:
    if not ROUTER_PYTHON.exists():
        return False
    return subprocess.run([str(ROUTER_PYTHON), "-c", "import sglang_router"], capture_output=True).returncode == 0


def require_router() -> None:
    """Skip, saying why, where `make router-env` could not install SGLang's router."""
    if not _router_installed():
        pytest.skip(f"sglang-router is not installed at {ROUTER_PYTHON}: `make router-env` installs it "
                    "(it needs the PyPI package sglang-router; `make test` tries once)")


class Launch:
    """`minisgl router ...` in a subprocess, its output read on a thread."""

    def __init__(self, args: list[str]):
        self.port: int | None = None  # --port 0: the ready line names the one the launcher picked
        cmd = [sys.executable, "-m", "minisgl.cli", "router", "--port", "0",
               "--router-python", str(ROUTER_PYTHON), *args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ENV)
        self.lines: list[str] = []
        self.workers: dict[int, tuple[str, int, int]] = {}  # i -> (url, scheduler pid, detokenizer pid)
        self.ready = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
            if m := READY.search(line):
                self.workers[int(m.group(1))] = (m.group(2), int(m.group(3)), int(m.group(4)))
            if m := ROUTER_READY.match(line):
                self.port = int(m.group(1))
                self.ready.set()
        self.ready.set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def wait_ready(self, timeout: float = 600) -> Launch:
        self.ready.wait(timeout)
        assert self.proc.poll() is None, "minisgl router did not start:\n" + self.output()[-4000:]
        self.descendants = psutil.Process(self.proc.pid).children(recursive=True)
        return self

    def output(self) -> str:
        return "\n".join(self.lines)

    def router_log(self) -> str:
        """The router's own lines (the workers' are prefixed with [worker i]), without colour codes."""
        return ANSI.sub("", "\n".join(line for line in self.lines if not line.startswith("[worker")))

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(120)


def _running(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _alive(procs: list[psutil.Process], within: float = 15.0) -> list[psutil.Process]:
    deadline = time.monotonic() + within
    while True:
        alive = [p for p in procs if _running(p)]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.2)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    require_router()
    trace_dir = tmp_path_factory.mktemp("router-trace")
    launch = Launch(["--workers", "2", "--policy", "round_robin", "--trace", str(trace_dir), *WORKER_FLAGS,
                     "--", "--health-check-interval-secs", "1"]).wait_ready()
    launch.trace_dir = trace_dir
    yield launch
    # a clean stop, as after Ctrl-C: status 0, and no worker, engine process or router left running
    if launch.proc.poll() is None:
        assert launch.stop() == 0, launch.output()[-3000:]
    assert _alive(launch.descendants) == []


@pytest.fixture(scope="module")
def router_client(fleet):
    from openai import OpenAI

    return OpenAI(base_url=f"{fleet.url}/v1", api_key="none", max_retries=0, timeout=300)


@pytest.fixture(scope="module")
def reference(engine) -> str:
    return engine.generate(CHAT, GREEDY)["text"]


def _chat(client, model: str, request_id: str | None = None) -> str:
    headers = {"x-request-id": request_id} if request_id else None
    reply = client.chat.completions.create(model=model, messages=CHAT, temperature=0,
                                           max_tokens=GREEDY["max_new_tokens"], extra_headers=headers)
    return reply.choices[0].message.content


def test_every_endpoint_the_router_asks_for_is_there(fleet):
    """The router asked each worker for /health, /server_info and /model_info and found them (no 404, no
    fall-back to the deprecated /get_server_info), and labels the workers with the served model's name."""
    log = fleet.router_log()
    assert "Router ready" in log or "ready at" in log
    assert " 404" not in log and "returned 404" not in log and "falling back" not in log, log[-4000:]
    served = httpx.get(f"{fleet.url}/v1/models").json()["data"]
    assert [m["id"] for m in served] == ["SmolLM2-135M-Instruct.Q4_1"]
    worker_url = fleet.workers[0][0]
    info = httpx.get(f"{worker_url}/server_info").json()
    assert info["model_path"].endswith(".gguf") and info["dtype"] == "float32" and info["dp_size"] == 1
    assert info["max_total_num_tokens"] == 2048 and "api_key" not in info
    assert httpx.get(f"{worker_url}/get_server_info").json() == info
    model_info = httpx.get(f"{worker_url}/model_info").json()
    assert model_info["is_generation"] is True and model_info["architectures"] == ["LlamaForCausalLM"]
    assert model_info["model_type"] == "llama" and Path(model_info["tokenizer_path"]).exists()
    load = httpx.get(f"{worker_url}/get_load").json()
    assert load == [{"dp_rank": 0, "num_reqs": 0, "num_running_reqs": 0, "num_waiting_reqs": 0, "num_tokens": 0}]
    assert httpx.get(f"{worker_url}/health_generate", timeout=60).json() == {"status": "ok"}
    loads = httpx.get(f"{fleet.url}/get_loads").json()["workers"]
    assert sorted(w["load"] for w in loads) == [0, 0]  # -1 would mean the router could not read /get_load


def _request_ids(trace_dir: Path, count: int, timeout: float = 30) -> list[str]:
    """The router request ids a worker's trace recorded (its processes write on their own schedules)."""
    deadline = time.monotonic() + timeout
    while True:
        events = [ev for ev in load_trace(trace_dir).events if ev.name == "http.request_received"]
        ids = [ev.attrs["request_id"] for ev in events if "request_id" in ev.attrs]
        if len(ids) >= count or time.monotonic() > deadline:
            return ids
        time.sleep(0.2)


def test_requests_spread_keep_their_id_and_equal_the_engine(fleet, router_client, reference):
    model = "SmolLM2-135M-Instruct.Q4_1"
    answers = [_chat(router_client, model, f"router-test-{i}") for i in range(4)]
    assert answers == [reference] * 4
    stream = router_client.chat.completions.create(model=model, messages=CHAT, temperature=0, stream=True,
                                                   max_tokens=GREEDY["max_new_tokens"])
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == reference
    native = httpx.post(f"{fleet.url}/generate", json={"text": "Hi", "sampling_params": GREEDY}, timeout=300)
    assert native.status_code == 200, native.text
    # round_robin: two requests on each worker, each recorded under the id the router logged
    per_worker = [_request_ids(fleet.trace_dir / f"worker-{i}", 2) for i in range(2)]
    assert sorted(per_worker[0] + per_worker[1]) == [f"router-test-{i}" for i in range(4)]
    assert len(per_worker[0]) == len(per_worker[1]) == 2
    for request_id in per_worker[0] + per_worker[1]:
        assert f'request_id="{request_id}"' in fleet.router_log()


@pytest.mark.parametrize("policy", ["cache_aware", "power_of_two"])
def test_other_policies_serve(fleet, reference, policy):
    """Only the router is started again, in front of the same two workers (--worker-urls)."""
    from openai import OpenAI

    urls = [fleet.workers[i][0] for i in range(2)]
    launch = Launch(["--worker-urls", *urls, "--policy", policy]).wait_ready(timeout=120)
    try:
        client = OpenAI(base_url=f"{launch.url}/v1", api_key="none", max_retries=0, timeout=300)
        assert _chat(client, "SmolLM2-135M-Instruct.Q4_1") == reference
        assert f"Assigning policy {policy}" in launch.router_log()
    finally:
        assert launch.stop() == 0, launch.output()[-3000:]
    assert _alive(launch.descendants) == []
    assert all(psutil.pid_exists(fleet.workers[i][1]) for i in range(2))  # the workers were left alone


def test_a_killed_worker_is_routed_around(fleet, router_client, reference):
    engine_procs = [psutil.Process(pid) for pid in fleet.workers[1][1:]]  # its scheduler and detokenizer
    serve = engine_procs[0].parent()
    serve.kill()
    serve.wait(30)
    answers = [_chat(router_client, "SmolLM2-135M-Instruct.Q4_1") for _ in range(4)]
    assert answers == [reference] * 4
    assert _alive(engine_procs) == []  # its engine processes noticed and left too
    assert re.search(r"worker 1 \(.*\) exited with status -9", fleet.output())


def test_the_surviving_workers_trace_checks(fleet):
    """After the module's requests (and a /health_generate), the trace of the worker that was not killed
    passes `trace check`, and the launcher stops cleanly (the fixture checks that nothing is left)."""
    assert fleet.stop() == 0, fleet.output()[-3000:]
    assert check_trace(load_trace(fleet.trace_dir / "worker-0")) == []
