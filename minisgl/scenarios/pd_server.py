"""A scenario on a prefill/decode pair: `minisgl router --pd-disaggregation` (a prefill server, a decode
server and SGLang's router in its PD mode), driven through the router, then stopped with SIGTERM as a user
would.

Each server traces into a folder of its own; the scenario's trace folder receives their merge (`minisgl trace
merge`: processes named prefill/scheduler, decode/scheduler, ...), which check, replay and the lessons read.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections import deque
from pathlib import Path

import psutil

from minisgl.scenarios.base import TRACE_LEVEL, Scenario
from minisgl.scenarios.driver import Outcome
from minisgl.scenarios.server import left_running

READY_TIMEOUT = 900  # seconds: two servers loading the model at once on a busy 2-core machine
STOP_TIMEOUT = 60  # the launcher's own stop waits up to 40 s for its children
READY = re.compile(r"minisgl router: ready at (http://\S+)")


class NoRouter(RuntimeError):
    """sglang-router is not installed (.venv-router): the pair cannot run."""


def router_python(name: str) -> str:
    from minisgl.entrypoints.router_launcher import RouterLaunchError, find_router_python

    try:
        return find_router_python(None)
    except RouterLaunchError:
        raise NoRouter(f"scenario {name} needs SGLang's router (sglang-router in .venv-router): "
                       "run `make router-env`") from None


def pair_command(scenario: Scenario, folder: Path, python: str) -> list[str]:
    from minisgl.scenarios.server import engine_cli_flags

    # --port 0: the launcher picks the router's port (and picks again if another process took it first)
    return [sys.executable, "-m", "minisgl.cli", "router", "--pd-disaggregation", "--port", "0",
            "--policy", "round_robin", "--router-python", python, "--router-log-level", "warn",
            "--log-level", "warning", "--startup-timeout", str(READY_TIMEOUT), "--trace", str(folder),
            "--trace-level", str(TRACE_LEVEL), *engine_cli_flags(scenario), *scenario.server_flags]


def run_pd_pair(scenario: Scenario, trace_dir: str) -> Outcome:
    from tracer.servers import merge_traces

    python = router_python(scenario.name)
    folder = Path(tempfile.mkdtemp(prefix=f"minisgl-{scenario.name}-"))
    try:
        proc = subprocess.Popen(pair_command(scenario, folder, python), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, bufsize=1)
        tail: deque[str] = deque(maxlen=30)
        found: list[str] = []
        ready, closed = threading.Event(), threading.Event()

        def read() -> None:
            for line in proc.stdout:
                tail.append(line.rstrip("\n"))
                if (m := READY.search(line)) is not None:
                    found.append(m.group(1))
                    ready.set()
            ready.set()
            closed.set()

        threading.Thread(target=read, daemon=True).start()
        failed: Exception | None = None
        family: list[psutil.Process] = []
        try:
            ready.wait(READY_TIMEOUT)
            if not found:
                raise RuntimeError("the prefill/decode pair did not become ready; its last lines:\n"
                                   + "\n".join(tail))
            family = psutil.Process(proc.pid).children(recursive=True)  # both servers' and the router's
            try:
                results = scenario.server(found[0])
            except Exception as e:  # noqa: BLE001  (whatever the client saw, the servers say why)
                failed = e
        finally:
            code = _stop(proc)
        closed.wait(5)
        if failed is not None:
            raise RuntimeError(f"{failed}\nthe pair's last lines:\n" + "\n".join(tail)) from failed
        if code != 0:
            raise RuntimeError(f"the pair exited with status {code}; its last lines:\n" + "\n".join(tail))
        left = left_running(family)
        if left:
            raise RuntimeError(f"the pair stopped but left {len(left)} of its processes running: {left}")
        merge_traces([folder / "prefill", folder / "decode"], ["prefill", "decode"], Path(trace_dir))
        return Outcome(results=results or {}, server_processes=len(family))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _stop(proc: subprocess.Popen) -> int:
    """SIGTERM, as a service manager would: the launcher stops the router and both servers, then exits 0."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
    return proc.wait()
