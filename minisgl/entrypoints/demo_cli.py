"""`minisgl demo`: the whole path in one command. Start `minisgl serve --trace`, ask one question through
the official `openai` client, print the answer as it streams in, stop the server, show the request's trace,
and open the replay on it (in a terminal; elsewhere, e.g. in CI, print the command that opens it)."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import threading
import time
from collections import deque

READY = re.compile(r"ready at (http://\S+)")
TRACING = re.compile(r"tracing to (.+) \(level")
SOCKETS = re.compile(r"sockets in (\S+)\)")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "demo",
        help="start a traced server, stream one chat answer through the openai client, show the trace folder",
        description="Start `minisgl serve --trace` on a free port, send one streaming chat request with the "
                    "official openai client, print the answer as it arrives, stop the server cleanly and "
                    "print where the trace was written.",
    )
    p.add_argument("question", nargs="?", default="What is the capital of China?", help="the user message")
    p.add_argument("--max-tokens", type=int, default=64, help="most tokens in the answer (default 64)")
    # the one spelling every command uses (as `minisgl serve --trace [DIR]`); the demo always traces
    p.add_argument("--trace", dest="trace_dir", nargs="?", const=None, default=None, metavar="DIR",
                   help="write the trace to DIR (default: ./minisgl-trace-YYYYmmdd-HHMMSS)")
    p.add_argument("--trace-dir", dest="trace_dir", help=argparse.SUPPRESS)  # its older spelling
    p.add_argument("--timeout", type=float, default=600, help="seconds to wait for the server to be ready")
    p.add_argument("--no-replay", action="store_true",
                   help="do not open the replay at the end, only print the command that opens it (the "
                        "default when stdin or stdout is not a terminal)")
    p.set_defaults(func=run)


class _ServerOutput:
    """Reads the server's output on a thread (so its pipe never fills) and notes the lines we wait for."""

    def __init__(self, proc: subprocess.Popen):
        self.url: str | None = None
        self.trace_dir: str | None = None
        self.ipc_dir: str | None = None  # the folder of the server's ZeroMQ sockets, removed when it stops
        self.tail: deque[str] = deque(maxlen=20)
        self.ready = threading.Event()
        self.closed = threading.Event()  # the whole output is read: tail holds the last lines
        threading.Thread(target=self._read, args=(proc,), daemon=True).start()

    def _read(self, proc: subprocess.Popen) -> None:
        for line in proc.stdout:
            line = line.rstrip("\n")
            self.tail.append(line)
            if (m := TRACING.search(line)) is not None:
                self.trace_dir = m.group(1)
            if (m := SOCKETS.search(line)) is not None:
                self.ipc_dir = m.group(1)
            if (m := READY.search(line)) is not None:
                self.url = m.group(1)
                self.ready.set()
        self.ready.set()  # the server exited: stop waiting
        self.closed.set()


def run(args: argparse.Namespace) -> int:
    from openai import OpenAI

    trace = ["--trace"] + ([args.trace_dir] if args.trace_dir else [])
    cmd = [sys.executable, "-m", "minisgl.cli", "serve", "--port", "0", "--log-level", "warning",
           "--max-total-tokens", "4096", *trace]
    print(f"$ minisgl serve --port 0 {' '.join(trace)}   (loading the model in three processes ...)",
          flush=True)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    out = _ServerOutput(proc)
    try:
        out.ready.wait(args.timeout)
        if out.url is None:
            print("minisgl demo: error: the server did not become ready; its last lines:", file=sys.stderr)
            print("\n".join(out.tail), file=sys.stderr)
            return 1
        print(f"server ready at {out.url}")
        client = OpenAI(base_url=f"{out.url}/v1", api_key="not-needed")
        model = client.models.list().data[0].id
        print(f"\nuser: {args.question}\nassistant: ", end="", flush=True)
        t0 = time.perf_counter()
        stream = client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": args.question}], stream=True, temperature=0,
            max_tokens=args.max_tokens,
        )
        rid = None
        for chunk in stream:
            rid = rid or chunk.id.removeprefix("chatcmpl-")
            if chunk.choices and chunk.choices[0].delta.content:
                print(chunk.choices[0].delta.content, end="", flush=True)
        print(f"\n\n({time.perf_counter() - t0:.2f} s)")
    finally:
        code = _stop(proc)
    if code != 0:
        print(f"minisgl demo: the server exited with status {code}", file=sys.stderr)
        return 1
    print(f"trace written to {out.trace_dir}")
    print(f"$ minisgl trace show {out.trace_dir} --rid {rid}")
    _show_request(out.trace_dir, rid)
    in_terminal = sys.stdin.isatty() and sys.stdout.isatty()
    return _replay(out.trace_dir, rid, interactive=in_terminal and not args.no_replay)


def _replay(trace_dir: str, rid: str | None, interactive: bool) -> int:
    """Open the replay app on the demo's trace; without a terminal, say how to open it."""
    command = f"minisgl replay {trace_dir}" + (f" --rid {rid}" if rid else "")
    if not interactive:
        print(f"\nstep through it round by round: {command}")
        return 0
    print(f"$ {command}   (q quits)", flush=True)
    from tui.launch import run

    return run(argparse.Namespace(dir=trace_dir, follow=False, rid=rid, poll=0.5))


def _show_request(trace_dir: str, rid: str | None) -> None:
    """The request's life as the trace recorded it: the same tables as `minisgl trace show --rid`."""
    from rich.console import Console

    from tracer.reader import load_trace
    from tracer.show import show

    show(load_trace(trace_dir), Console(), rid=rid)


def _stop(proc: subprocess.Popen) -> int:
    """Ctrl-C, as a user would: the server stops its children and removes its sockets."""
    if proc.poll() is None:
        proc.send_signal(2)
        try:
            return proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
    return proc.wait()
