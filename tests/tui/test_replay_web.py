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


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _apps(proc: subprocess.Popen) -> list[psutil.Process]:
    """The server's tab apps (each runs `minisgl.cli replay` without --web)."""
    return [p for p in psutil.Process(proc.pid).children(recursive=True) if "--web" not in p.cmdline()
            and "minisgl.cli" in p.cmdline()]


async def _drive(port: int, proc: subprocess.Popen, sig: int) -> tuple[str, str, str, list]:
    """The page, then the app's first screen and its screen after `?`, as the websocket sends them (plain
    text); then, with the tab still open (a browser left open), `sig` to the server, and the app processes it
    had. The server is waited for as long as it is alive (a loaded machine can take a while to import
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
            # a second tab, still loading (its page never sized the terminal): its app has started
            loading = await http.ws_connect(f"http://127.0.0.1:{port}/ws?width=100&height=30")
            deadline = time.monotonic() + 120
            while len(_apps(proc)) < 2:
                assert time.monotonic() < deadline, "the second tab's app never started"
                await asyncio.sleep(0.1)
            children, apps = psutil.Process(proc.pid).children(recursive=True), _apps(proc)
            proc.send_signal(sig)  # what Ctrl+C sends; what a service manager, `docker stop` or `kill` sends
            # The server ends the open tabs' sessions at once (in well under a second). The bound only catches
            # what this guards against: textual-serve by itself leaves an open tab's app running until the
            # session times out (23 s here), so a service manager's SIGKILL that follows finds it re-parented.
            while not ws.closed:
                try:
                    msg = await ws.receive(timeout=15)
                except asyncio.TimeoutError:
                    pytest.fail("the server kept the open tab after the signal")
                if msg.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED):
                    break
            # the loading tab's browser has not hung up, and still its app is stopped
            _, alive = psutil.wait_procs(apps, timeout=15)
            assert not alive, f"a tab's app still runs after the signal: {alive}"
            await loading.close()
    return page, first, after, children


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_the_app_is_served_in_a_browser_and_stops_with_everything_it_started(sig):
    # --port 0: the server picks a free port and says which (no port chosen here that another test may take)
    proc = subprocess.Popen(REPLAY + [str(ENGINE), "--web", "--port", "0"], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    children: list = []
    said = proc.stdout.readline()  # printed, flushed, before it serves
    found = re.search(r"http://127\.0\.0\.1:(\d+)/", said)
    assert found, said + proc.stdout.read() if proc.poll() is not None else said
    port = int(found.group(1))
    try:
        page, first, after, children = asyncio.run(_drive(port, proc, sig))
        assert "minisgl replay" in page and "/ws" in page
        assert "next event" not in first  # the help screen is not up before the key ...
        assert "next event" in after  # ... and is after it
        assert children, "each browser connection runs the app in a subprocess"
    finally:
        if proc.poll() is None and not children:
            proc.send_signal(sig)  # _drive failed before it sent the signal
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
    # the port stays bound here for the whole run (no other process can take it): a replay that tried to
    # serve on it would fail on the port; this one says only what is wrong with the folder
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        port = held.getsockname()[1]
        r = subprocess.run(REPLAY + [str(tmp_path / "nope"), "--web", "--port", str(port)], check=False,
                           cwd=ROOT, text=True, capture_output=True, timeout=60)
    assert r.returncode == 2
    assert r.stderr.splitlines() == [f"minisgl replay: error: trace folder {tmp_path / 'nope'} does not exist"]
    assert r.stdout == ""
