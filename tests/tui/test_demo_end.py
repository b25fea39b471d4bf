"""`minisgl demo` ends by opening the replay on its trace in a terminal, and prints the command elsewhere.

In a terminal the real app is opened in a pseudo-terminal, as a user's shell would run it: its screen must
show the trace with the demo's request selected and followed, and q must quit it with status 0."""

from __future__ import annotations

import argparse
import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

from minisgl.entrypoints import demo_cli
from tests.tracer.helpers import ENGINE

ROOT = Path(__file__).resolve().parents[2]
ROWS, COLS = 30, 100
# CSI and OSC sequences, DCS/APC strings, and two-byte escapes: what is left is the text on the screen
ESCAPE = re.compile(rb"\x1b(\[[0-9;?<>=$]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[PX^_][^\x1b]*\x1b\\|[@-Z\\-_])")


class Terminal:
    """A child process on a pseudo-terminal of ROWS x COLS; `screen` is what it has written, escapes removed."""

    def __init__(self, argv: list[str]):
        self.fd, child = pty.openpty()
        fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
        self.proc = subprocess.Popen(argv, stdin=child, stdout=child, stderr=child, cwd=ROOT,
                                     env={**os.environ, "TERM": "xterm-256color"}, start_new_session=True)
        os.close(child)
        self.raw = b""

    @property
    def screen(self) -> str:
        return ESCAPE.sub(b"", self.raw).decode("utf-8", "replace")

    def wait_for(self, done, what: str, timeout: float = 120) -> None:
        """Read the terminal until done() holds; fail with what was on it after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while not done():
            assert time.monotonic() < deadline, f"{what}, not seen within {timeout} s:\n{self.screen[-3000:]}"
            if select.select([self.fd], [], [], 0.2)[0]:
                try:
                    data = os.read(self.fd, 65536)
                except OSError:  # the child closed the terminal
                    data = b""
                if not data and self.proc.poll() is not None:
                    assert done(), f"{what}: the process ended first:\n{self.screen[-3000:]}"
                    return
                self.raw += data

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(30)
        os.close(self.fd)


def test_without_a_terminal_it_prints_the_command(capsys):
    assert demo_cli._replay(str(ENGINE), "req-a", interactive=False) == 0
    assert capsys.readouterr().out.strip().endswith(f"minisgl replay {ENGINE} --rid req-a")


def test_in_a_terminal_it_opens_the_replay_on_the_request():
    code = ("import sys; from minisgl.entrypoints.demo_cli import _replay; "
            f"sys.exit(_replay({str(ENGINE)!r}, 'req-b', interactive=True))")
    term = Terminal([sys.executable, "-c", code])
    try:
        shown = ("following req-b", "req-b  HTTP/TM", " rid    prompt", " req-a  ids 10 11 12 13 14 15")
        term.wait_for(lambda: all(s in term.screen for s in shown), "the replay app on req-b")
        screen = term.screen
        assert f"$ minisgl replay {ENGINE} --rid req-b   (q quits)" in screen  # printed before the app opens
        assert "1 Reqs" in screen and "paused #" in screen  # the app's tabs and scrubber
        os.write(term.fd, b"q")
        term.wait_for(lambda: term.proc.poll() is not None, "q quitting the app")
        assert term.proc.wait(30) == 0
    finally:
        term.close()


def test_no_replay_keeps_a_terminal_run_non_interactive():
    parser = argparse.ArgumentParser()
    demo_cli.register(parser.add_subparsers())
    args = parser.parse_args(["demo", "--no-replay"])
    assert args.no_replay is True
