"""The child processes a grade runs: each in its own process group with a time limit, so a crash or an
endless loop in the learner's code is reported, never inherited; MINISGL_LAB names the learner's file."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from minisgl.labs.lab import Lab
from minisgl.labs.swap import ENV


@dataclass
class Child:
    code: int | None  # None: killed at the time limit
    output: str


class _DeferredSignals:
    """SIGINT and SIGTERM held back while a child is being started: one that came inside Popen would raise
    there, after the fork but before `proc` exists, and nothing could then take the child down. `replay`
    raises it again once the caller can."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __enter__(self) -> _DeferredSignals:
        self.came: list[int] = []
        self.old = {}
        if threading.current_thread() is threading.main_thread():  # only the main thread takes signals
            self.old = {sig: signal.signal(sig, lambda signum, frame: self.came.append(signum))
                        for sig in self.SIGNALS}
        return self

    def __exit__(self, *exc) -> None:
        for sig, handler in self.old.items():
            signal.signal(sig, handler)

    def replay(self) -> None:
        for signum in self.came:
            signal.raise_signal(signum)


def run_child(cmd: list[str], env: dict[str, str], timeout: float) -> Child:
    """Run cmd in its own process group; at the time limit kill the whole group (a server's children too)."""
    with _DeferredSignals() as deferred:
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)
    try:
        deferred.replay()  # a signal that came during the start ends the grade here, and the finally below
        out, _ = proc.communicate(timeout=timeout)
        return Child(proc.returncode, out)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return Child(None, out)
    finally:
        if proc.poll() is None:  # the grade itself was stopped (Ctrl+C, SIGTERM): its children go with it
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def exit_on_sigterm() -> None:
    """SIGTERM (a service manager, `kill`, a CI runner's cancel) ends a grade as Ctrl+C does: the exit unwinds
    through run_child, which takes the running child's process group down with it. (A child runs in a
    session of its own, so neither signal reaches it directly.)"""
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))


def lab_env(lab: Lab, learner: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != ENV}
    if learner is not None:
        env[ENV] = f"{lab.component}={learner}"
    return env
