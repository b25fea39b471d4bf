"""`minisgl router` refusing what it cannot run: exit status 2 and one line on stderr that says why, before
any worker starts (so no model is loaded and nothing is left running)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.server.conftest import ENV

CLI = [sys.executable, "-m", "minisgl.cli", "router"]


@pytest.mark.parametrize(("args", "message"), [
    (["--router-python", "/no/such/python"], "no Python with sglang-router at /no/such/python: run `make router-env`"),
    (["--router-python", sys.executable], "cannot import sglang_router"),
    (["--workers", "2", "--worker-urls", "http://127.0.0.1:1"], "give --workers"),
    (["--workers", "1", "--policy", "power_of_two"], "--policy power_of_two needs at least 2 workers"),
    (["--max-total-tokens", "-5"], "--max-total-tokens must be >= 1, not -5"),
    (["--workers", "0"], "must be at least 1"),
    (["--port", "70000"], "must be a port number"),
    (["--pd-disaggregation", "--workers", "2"], "--pd-disaggregation starts its own prefill and decode server"),
    (["--pd-disaggregation", "--disaggregation-mode", "decode"], "gives each server its --disaggregation-mode"),
])
def test_refused_before_anything_starts(args, message):
    out = subprocess.run([*CLI, *args], capture_output=True, text=True, env=ENV, timeout=120)
    assert out.returncode == 2, out.stderr
    assert message in out.stderr
    assert "Traceback" not in out.stderr and "[worker" not in out.stdout
