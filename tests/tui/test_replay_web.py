"""`minisgl replay DIR --web`: a real server (textual-serve) on a fixture trace, driven over its websocket the
way the browser page drives it; and a bad folder that fails before any server starts."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.tracer.helpers import ENGINE

ROOT = Path(__file__).resolve().parents[2]
REPLAY = [sys.executable, "-m", "minisgl.cli", "replay"]
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>]")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


async def _drive(port: int, proc: subprocess.Popen) -> tuple[str, str, str]:
    """The page, then the app's first screen and its screen after `?`, as the websocket sends them (plain
    text). The server is waited for as long as it is alive (a loaded machine can take a while to import
    Textual); the deadline only guards against a server that hangs before it listens."""
    import aiohttp

    async with aiohttp.ClientSession() as http:
        deadline = time.monotonic() + 180
        while True:
            assert proc.poll() is None, "the server exited before it answered"
            try:
                async with http.get(f"http://127.0.0.1:{port}/") as r:
                    assert r.status == 200
                    page = await r.text()
                    break
            except aiohttp.ClientConnectionError:
                assert time.monotonic() < deadline, "the server never answered"
                await asyncio.sleep(0.2)

        async with http.ws_connect(f"http://127.0.0.1:{port}/ws?width=100&height=30") as ws:
            await ws.send_str(json.dumps(["resize", {"width": 100, "height": 30}]))

            async def read_until(words: tuple[str, ...], seconds: float) -> str:
                out, end = "", time.monotonic() + seconds
                while not all(w in ANSI.sub("", out) for w in words):
                    left = end - time.monotonic()
                    assert left > 0, f"never saw {words}: {ANSI.sub('', out)[-2000:]!r}"
                    msg = await ws.receive(timeout=left)
                    assert msg.type in (aiohttp.WSMsgType.BINARY, aiohttp.WSMsgType.TEXT), msg
                    out += msg.data.decode("utf-8", "replace") if isinstance(msg.data, bytes) else msg.data
                return ANSI.sub("", out)

            first = await read_until(("help", "quit", "Reqs"), 120)
            await ws.send_str(json.dumps(["stdin", "?"]))
            after = await read_until(("Esc closes this help", "Panes"), 60)
    return page, first, after


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_the_app_is_served_in_a_browser_and_stops_with_everything_it_started(sig):
    # --port 0: the server picks a free port and says which (no port chosen here that another test may take)
    proc = subprocess.Popen(REPLAY + [str(ENGINE), "--web", "--port", "0"], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    server = psutil.Process(proc.pid)
    said = proc.stdout.readline()  # printed, flushed, before it serves
    found = re.search(r"http://127\.0\.0\.1:(\d+)/", said)
    assert found, said + proc.stdout.read() if proc.poll() is not None else said
    port = int(found.group(1))
    try:
        page, first, after = asyncio.run(_drive(port, proc))
        assert "minisgl replay" in page and "/ws" in page
        assert "next event" not in first  # the help screen is not up before the key ...
        assert "next event" in after  # ... and is after it
        children = server.children(recursive=True)
        assert children, "each browser connection runs the app in a subprocess"
    finally:
        proc.send_signal(sig)  # what Ctrl+C sends; what a service manager, `docker stop` or `kill` sends
        try:
            out, _ = proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
            pytest.fail(f"the server did not stop on {sig.name}:\n{out}")
    assert "Ctrl+C" in said + out
    _, alive = psutil.wait_procs(children, timeout=5)
    assert not alive, f"left running: {alive}"
    assert not _listening(port)


def test_a_bad_folder_fails_before_any_server_starts(tmp_path):
    port = _free_port()
    r = subprocess.run(REPLAY + [str(tmp_path / "nope"), "--web", "--port", str(port)], check=False, cwd=ROOT,
                       text=True, capture_output=True, timeout=60)
    assert r.returncode == 2
    assert r.stderr.splitlines() == [f"minisgl replay: error: trace folder {tmp_path / 'nope'} does not exist"]
    assert r.stdout == ""
    assert not _listening(port)
