"""Open the replay app on a trace folder: `python -m tui DIR` and `minisgl replay DIR` both end here.
A folder that cannot be read is one line on stderr and exit status 2, before the screen is taken over."""

from __future__ import annotations

import argparse
import sys


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", help="the trace folder (written with `minisgl serve --trace` or Engine(trace_dir=...))")
    p.add_argument("--follow", action="store_true",
                   help="live mode: keep reading the folder while a running server writes it (the cursor "
                        "follows the newest event while it is at the end)")
    p.add_argument("--rid", help="select this request and follow it: steps visit only its events and rounds "
                                 "(a unique prefix will do)")
    p.add_argument("--poll", type=float, default=0.5, metavar="SECONDS",
                   help="with --follow: how often to look for new lines (default 0.5)")


def run(args: argparse.Namespace, prog: str = "minisgl replay") -> int:
    from tracer.reader import TraceError, TraceTail, load_trace
    from tracer.show import find_rid

    if args.poll <= 0:
        print(f"{prog}: error: --poll must be a positive number of seconds, not {args.poll}", file=sys.stderr)
        return 2
    try:
        if args.follow:
            tail = TraceTail(args.dir)
            tail.poll()
            trace = tail.trace
        else:
            tail, trace = None, load_trace(args.dir)
        rid = find_rid(trace, args.rid) if args.rid else None
    except TraceError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    from tui.app import ReplayApp

    ReplayApp(trace, tail=tail, rid=rid, poll_seconds=args.poll).run()
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tui", description="Replay a minisgl trace in the terminal.")
    add_arguments(p)
    return run(p.parse_args(argv), prog="python -m tui")
