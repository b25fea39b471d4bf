"""`minisgl replay DIR`: open the Textual replay app on a trace folder (the app itself lives in `tui/`).
A folder that cannot be read is one line on stderr and exit status 2."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "replay", help="step through a trace in the terminal, round by round (Textual app)",
        description="Replay a trace folder in the terminal: a scrubber over the merged timeline, with the "
                    "requests, process lanes, event, round batch, KV pool, radix tree, queues and client "
                    "output in step. Press ? in the app for every key. With --web, the same app in a "
                    "browser.",
    )
    from tui.launch import add_arguments  # argparse only: textual is imported when the app opens

    add_arguments(p)
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    import sys

    from tui.launch import run

    # with --web, each browser tab runs this same command (without --web) through the module
    return run(args, prog="minisgl replay", command=[sys.executable, "-m", "minisgl.cli", "replay"])
