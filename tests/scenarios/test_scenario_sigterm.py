"""`minisgl scenario run` of a server scenario stopped with SIGTERM (what `kill`, a service manager or a CI
runner's cancel sends) stops as Ctrl+C does: its `minisgl serve` and that server's children go too."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import psutil


def test_sigterm_stops_a_server_scenario_and_its_server(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "minisgl.cli", "scenario", "run", "one_request", "--trace",
                             str(tmp_path / "trace")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    tree: list[psutil.Process] = []
    try:
        parent = psutil.Process(proc.pid)
        deadline = time.monotonic() + 300
        # the server and its scheduler and detokenizer: the tree a SIGTERM must take down
        while len(parent.children(recursive=True)) < 3:
            assert proc.poll() is None and time.monotonic() < deadline, "the scenario's server never started"
            time.sleep(0.2)
        tree = parent.children(recursive=True)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=120) != 0
        _, alive = psutil.wait_procs(tree, timeout=60)
        assert alive == [], [p.cmdline() for p in alive]
    finally:  # whatever happened, nothing of it outlives the test
        for p in [psutil.Process(proc.pid), *tree] if proc.poll() is None else tree:
            if p.is_running():
                p.kill()


def test_a_process_a_stopped_server_left_running_is_named_and_ended():
    """What a served scenario run checks once its server has stopped (scenarios/server.py): a process of
    the server's that is still running is reported by name and pid, and killed; one that ended is not."""
    from minisgl.scenarios.server import left_running

    stuck = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        family = [psutil.Process(stuck.pid)]
        assert left_running(family, within=0.1) == [f"{family[0].name()} ({stuck.pid})"]
        assert stuck.wait(timeout=30) == -signal.SIGKILL
        assert left_running(family, within=0.1) == []  # ended (reaped): nothing left
    finally:
        if stuck.poll() is None:
            stuck.kill()
