"""The child processes a grade runs: each in its own process group with a time limit, so a crash or an
endless loop in the learner's code is reported, never inherited; MINISGL_LAB names the learner's file."""

from __future__ import annotations

import os
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

from minisgl.labs.lab import Lab
from minisgl.labs.swap import ENV


@dataclass
class Child:
    code: int | None  # None: killed at the time limit
    output: str


def run_child(cmd: list[str], env: dict[str, str], timeout: float) -> Child:
    """Run cmd in its own process group; at the time limit kill the whole group (a server's children too)."""
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
        return Child(proc.returncode, out)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return Child(None, out)


def lab_env(lab: Lab, learner: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != ENV}
    if learner is not None:
        env[ENV] = f"{lab.component}={learner}"
    return env
