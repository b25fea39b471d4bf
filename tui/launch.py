"""Open the replay app on a trace folder: `python -m tui DIR` and `minisgl replay DIR` both end here.
A folder that cannot be read is one line on stderr and exit status 2, before the screen is taken over."""

from __future__ import annotations

import argparse
import sys


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir",
                   help="the trace folder (written with `minisgl serve --trace` or Engine(trace_dir=...))")
    p.add_argument("--follow", action="store_true",
                   help="live mode: keep reading the folder while a running server writes it (the cursor "
                        "follows the newest event while it is at the end)")
    p.add_argument("--rid", help="select this request and follow it: steps visit only its events and rounds "
                                 "(a unique prefix will do)")
    p.add_argument("--poll", type=float, default=0.5, metavar="SECONDS",
                   help="with --follow: how often to look for new lines (default 0.5)")
    p.add_argument("--dp-rank", type=int, default=0, metavar="N",
                   help="a trace of `minisgl serve --dp-size N`: replay scheduler rank N (scheduler_dpN) "
                        "beside the HTTP server, TokenizerManager, DataParallelController and detokenizer "
                        "(default 0); the other ranks' scheduler events are left out. A trace with one "
                        "scheduler ignores it")
    p.add_argument("--server", default=None, metavar="NAME",
                   help="a merged trace of several servers (`minisgl trace merge`): replay this one "
                        "(default: decode, else the first by name)")
    web = p.add_argument_group("in a browser (textual-serve)")
    web.add_argument("--web", action="store_true",
                     help="serve the app in a browser instead of the terminal: each browser tab runs its own "
                          "copy on the same trace with the same options (for a class following along without "
                          "a terminal); Ctrl+C stops the server")
    web.add_argument("--host", default="127.0.0.1",
                     help="with --web: the address to listen on, and the one the page tells the browser to "
                          "connect back to (default 127.0.0.1, this machine only; for a class, this "
                          "machine's address on the network)")
    web.add_argument("--port", type=int, default=8000,
                     help="with --web: the port (default 8000, a fixed URL you can write on the board; 0 "
                          "picks a free one). The page loads its font from fonts.googleapis.com; offline it "
                          "falls back to a local monospace font")


def run(args: argparse.Namespace, prog: str = "minisgl replay", command: list[str] | None = None) -> int:
    """Open the app on args.dir; with args.web, serve it in a browser, each tab running `command` (the
    words that start this app, before the folder and options: `python -m tui` when not given)."""
    from tracer.dp_ranks import pick_rank
    from tracer.reader import TraceError, TraceTail, load_trace
    from tracer.servers import pick_server
    from tracer.show import find_rid

    if args.poll <= 0:
        print(f"{prog}: error: --poll must be a positive number of seconds, not {args.poll}", file=sys.stderr)
        return 2
    dp_rank = getattr(args, "dp_rank", 0)
    try:
        if args.follow:
            tail = TraceTail(args.dir, dp_rank=dp_rank)
            tail.poll()
            trace = tail.trace
        else:
            tail, trace = None, pick_rank(pick_server(load_trace(args.dir), getattr(args, "server", None)),
                                          dp_rank)
        rid = find_rid(trace, args.rid) if args.rid else None
    except (TraceError, ValueError) as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    if getattr(args, "web", False):
        from tui.web import serve

        return serve(_app_argv(args, command or [sys.executable, "-m", "tui"]), args.host, args.port, prog)
    from tui.app import ReplayApp

    ReplayApp(trace, tail=tail, rid=rid, poll_seconds=args.poll).run()
    return 0


def _app_argv(args: argparse.Namespace, command: list[str]) -> list[str]:
    """The command line of this app on the same folder with the same options, without --web."""
    import os

    argv = [*command, os.path.abspath(args.dir), "--poll", repr(args.poll)]
    if args.follow:
        argv.append("--follow")
    if getattr(args, "dp_rank", 0):
        argv.append(f"--dp-rank={args.dp_rank}")
    if getattr(args, "server", None):
        argv.append(f"--server={args.server}")
    if args.rid:
        argv.append(f"--rid={args.rid}")  # one word, even if the rid starts with a dash
    return argv


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tui", description="Replay a minisgl trace in the terminal.")
    add_arguments(p)
    return run(p.parse_args(argv), prog="python -m tui", command=[sys.executable, "-m", "tui"])
