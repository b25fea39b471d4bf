"""Scenarios about HTTP, ZeroMQ and the detokenizer process run the real server: `minisgl serve --trace`
in a subprocess on a free port, driven by an HTTP client, then stopped with Ctrl-C as a user would."""

from __future__ import annotations

import os
import subprocess
import sys

import psutil

from minisgl.scenarios.base import TRACE_LEVEL, Scenario
from minisgl.scenarios.driver import Outcome, engine_args

READY_TIMEOUT = 600  # seconds: loading the model in three processes on a busy 2-core machine


def engine_cli_flags(scenario: Scenario) -> list[str]:
    """Every engine flag of the scenario, spelled as `minisgl serve` takes it."""
    args = engine_args(scenario)
    if args["chunked_prefill_size"] is None:
        args["chunked_prefill_size"] = -1  # the flag's way to say "no chunking"
    return [
        part
        for key, value in args.items()
        if value is not None and value is not False
        for part in (
            (f"--{key.replace('_', '-')}",) if value is True else (f"--{key.replace('_', '-')}", str(value))
        )
    ]


def serve_command(scenario: Scenario, trace_dir: str) -> list[str]:
    flags = engine_cli_flags(scenario)
    return [
        sys.executable,
        "-m",
        "minisgl.cli",
        "serve",
        "--port",
        "0",
        "--log-level",
        "warning",
        "--trace",
        trace_dir,
        "--trace-level",
        str(TRACE_LEVEL),
        *flags,
        *scenario.server_flags,
    ]


def run_server(scenario: Scenario, trace_dir: str) -> Outcome:
    from minisgl.entrypoints.demo_cli import _ServerOutput, _stop

    if scenario.pd_disaggregation:
        from minisgl.scenarios.pd_server import run_pd_pair

        return run_pd_pair(scenario, trace_dir)

    proc = subprocess.Popen(
        serve_command(scenario, trace_dir),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
    )
    out = _ServerOutput(proc)
    failed: Exception | None = None
    family: list[psutil.Process] = []
    try:
        out.ready.wait(READY_TIMEOUT)
        if out.url is None:
            raise RuntimeError("the server did not become ready; its last lines:\n" + "\n".join(out.tail))
        family = psutil.Process(proc.pid).children(recursive=True)
        try:
            got = scenario.server(out.url)
        except Exception as e:  # noqa: BLE001  (whatever the client saw, the server says why)
            failed = e
    finally:
        code = _stop(proc)
    if failed is not None:
        out.closed.wait(5)
        what = str(failed) if type(failed) is RuntimeError else f"{type(failed).__name__}: {failed}"
        raise RuntimeError(f"{what}\nthe server's last lines:\n" + "\n".join(out.tail)) from failed
    if code != 0:
        raise RuntimeError(f"the server exited with status {code}; its last lines:\n" + "\n".join(out.tail))
    left = left_running(family)
    if left:
        raise RuntimeError(f"the server stopped but left {len(left)} of its processes running: {left}")
    if out.ipc_dir and os.path.exists(out.ipc_dir):
        raise RuntimeError(f"the server stopped but left its sockets' folder {out.ipc_dir}")
    outcome = got if isinstance(got, Outcome) else Outcome(results=got or {})
    outcome.server_processes = len(family)
    return outcome


def left_running(family: list[psutil.Process], within: float = 10.0) -> list[str]:
    """Which of a stopped server's processes were still running after `within` seconds (a zombie has
    ended), each as `name (pid)`; those are killed, so a failed run leaves nothing behind either."""
    _, alive = psutil.wait_procs(family, timeout=within)
    found = []
    for p in alive:
        try:
            if p.status() != psutil.STATUS_ZOMBIE:
                found.append(f"{p.name()} ({p.pid})")
                p.kill()
        except psutil.NoSuchProcess:
            pass
    return found
