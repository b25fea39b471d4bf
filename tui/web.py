"""`minisgl replay DIR --web`: the same replay app in a browser, served by `textual-serve`.

The server runs the app's own command line (without --web) in a subprocess per browser tab, so every tab
gets its own cursor on the same trace. The page's JavaScript and CSS come with textual-serve; the one
thing it fetches from the internet is the Roboto Mono web font (fonts.googleapis.com), and without it
the browser falls back to a local monospace font."""

from __future__ import annotations

import asyncio
import os
import shlex
import signal
import socket
import sys
import time

WILDCARD_HOSTS = ("0.0.0.0", "::", "")
TAB_EXIT_S = 3.0  # after the stop: how long a tab's app may take to exit before it is killed


def free_port(host: str = "127.0.0.1") -> int:
    """A port nobody listens on right now (the OS picks it)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def port_error(host: str, port: int) -> str | None:
    """Why the server could not listen on host:port (in use, no such address), or None if it can."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as aiohttp binds: a TIME_WAIT port is free
        try:
            s.bind((host, port))
        except (OSError, UnicodeError) as e:  # in use, not an address of this machine, a bad name
            return f"cannot listen on {host}:{port}: {e.strerror or e}"
    return None


def serve(argv: list[str], host: str, port: int, prog: str) -> int:
    """Serve `argv` (the app's command, a list of words) at http://host:port/ until Ctrl+C."""
    if not 0 <= port <= 65535:
        print(f"{prog}: error: --port must be between 0 and 65535, not {port}", file=sys.stderr)
        return 2
    if port == 0:
        port = free_port(host or "0.0.0.0")
    if err := port_error(host, port):
        print(f"{prog}: error: {err}", file=sys.stderr)
        return 2
    from textual_serve.server import Server

    class TabStoppingServer(Server):
        """textual-serve's server, except that SIGTERM or SIGINT stops every tab at once: its app gets
        SIGTERM, and the tab's session is ended (textual-serve alone waits for each open tab's browser to
        hang up, and a tab's app left running would be re-parented)."""

        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            self.sessions: set[asyncio.Task] = set()

        async def handle_websocket(self, request):
            task = asyncio.current_task()
            self.sessions.add(task)
            try:
                return await super().handle_websocket(request)
            finally:
                self.sessions.discard(task)

        async def on_shutdown(self, app) -> None:
            for task in list(self.sessions):
                task.cancel()  # its own cleanup closes the websocket and stops the app

        def request_exit(self) -> None:
            _signal_tabs(signal.SIGTERM)
            super().request_exit()

    # textual-serve runs it through the shell: every word quoted, and `exec` so the app is our own child
    command = "exec " + shlex.join(argv)
    url_host = f"[{host}]" if ":" in host else host
    url = f"http://{url_host}:{port}"
    server = TabStoppingServer(command, host=host, port=port, title="minisgl replay", public_url=url)
    print(f"{prog}: serving the replay app at {url}/ (open it in a browser; each tab runs its own copy). "
          "Ctrl+C stops the server.", flush=True)
    if host in WILDCARD_HOSTS:
        print(f"{prog}: note: the page tells the browser to connect back to {url}, which other machines "
              "cannot reach; pass --host with this machine's address on the network instead.", flush=True)
    try:
        server.serve()
    finally:
        _stop_tabs()
    return 0


def _tab_pids() -> list[int]:
    """This process's children: the app of each open tab (read from /proc; none where there is none)."""
    me, pids = os.getpid(), []
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8") as f:
                fields = f.read().rsplit(")", 1)[1].split()  # after the name, which may hold spaces
        except (OSError, IndexError):
            continue
        if fields[0] != "Z" and int(fields[1]) == me:
            pids.append(int(entry))
    return pids


def _signal_tabs(sig: int) -> None:
    for pid in _tab_pids():
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def _stop_tabs() -> None:
    """However the server ended: every tab's app gets SIGTERM, and SIGKILL if it is still there after
    TAB_EXIT_S; each is reaped, so none outlives the server."""
    _signal_tabs(signal.SIGTERM)
    deadline = time.monotonic() + TAB_EXIT_S
    while _tab_pids() and time.monotonic() < deadline:
        _reap()
        time.sleep(0.05)
    _signal_tabs(signal.SIGKILL)
    _reap()


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
