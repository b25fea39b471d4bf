"""`minisgl replay DIR --web`: the same replay app in a browser, served by `textual-serve`.

The server runs the app's own command line (without --web) in a subprocess per browser tab, so every tab
gets its own cursor on the same trace. The page's JavaScript and CSS come with textual-serve; the one
thing it fetches from the internet is the Roboto Mono web font (fonts.googleapis.com), and without it
the browser falls back to a local monospace font."""

from __future__ import annotations

import shlex
import socket
import sys

WILDCARD_HOSTS = ("0.0.0.0", "::", "")


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

    command = shlex.join(argv)  # textual-serve runs it through the shell: every word quoted
    url_host = f"[{host}]" if ":" in host else host
    url = f"http://{url_host}:{port}"
    server = Server(command, host=host, port=port, title="minisgl replay", public_url=url)
    print(f"{prog}: serving the replay app at {url}/ (open it in a browser; each tab runs its own copy). "
          "Ctrl+C stops the server.", flush=True)
    if host in WILDCARD_HOSTS:
        print(f"{prog}: note: the page tells the browser to connect back to {url}, which other machines "
              "cannot reach; pass --host with this machine's address on the network instead.", flush=True)
    server.serve()
    return 0
