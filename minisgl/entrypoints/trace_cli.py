"""`minisgl trace show|check|export DIR`: read a trace folder without running the engine.

Every failure to read (no folder, wrong schema version, corrupt line) is one line on stderr and exit
status 2, so scripts can tell "the trace is broken" (1, from check) from "I could not read it" (2).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable, NamedTuple


class ExportFormat(NamedTuple):
    """One `trace export --format` choice: a function from a Trace to the file's text, and its suffix."""

    render: Callable  # (Trace) -> str
    suffix: str
    help: str


def _perfetto(trace) -> str:
    from tracer.export_perfetto import export_perfetto

    return export_perfetto(trace)


# Add a format here: its name, a function Trace -> str, the default file suffix.
EXPORT_FORMATS: dict[str, ExportFormat] = {
    "perfetto": ExportFormat(_perfetto, ".perfetto.json",
                             "Chrome/Perfetto trace-event JSON (open it at ui.perfetto.dev)"),
}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("trace", help="read a trace folder: show it, check it, export it",
                       description="Read a trace folder (written with `--trace [DIR]` or "
                                   "Engine(trace_dir=...)) without running the engine.")
    tsub = p.add_subparsers(dest="trace_command", metavar="SUBCOMMAND")
    p.set_defaults(func=lambda args: _usage(p))

    s = tsub.add_parser("show", help="tables of the requests and rounds (and one request's timeline)",
                        description="Print a table of every request's lifecycle and of every round's batch.")
    s.add_argument("dir", help="the trace folder")
    s.add_argument("--rid",
                   help="also print this request's event-by-event timeline (a unique prefix will do)")
    s.set_defaults(func=_show)

    c = tsub.add_parser("check", help="check the trace's invariants (exit 0 if they all hold, 1 if not)",
                        description="Check that messages arrive, requests finish, KV slots are returned, "
                                    "tokens match the streamed text, and replay agrees with the engine every "
                                    "round.")
    c.add_argument("dir", help="the trace folder")
    c.set_defaults(func=_check)

    m = tsub.add_parser("merge", help="merge the traces of several servers (a prefill/decode pair) into one",
                        description="Copy each server's trace folder into OUT, each process renamed "
                                    "<server>/<process> (the server's name is --names', default prefill and "
                                    "decode for two folders). check checks each server and every KV transfer "
                                    "between them; replay opens one server (--server); a lifecycle diagram "
                                    "of one request spans both.")
    m.add_argument("dirs", nargs="+", metavar="DIR", help="the servers' trace folders")
    m.add_argument("-o", "--output", required=True, metavar="OUT", help="the new folder to write")
    m.add_argument("--names", nargs="+", default=None,
                   help="each server's name, in the order of the folders (default for two: prefill decode)")
    m.set_defaults(func=_merge)

    from tracer.diagrams import FORMATS, VIEWS

    e = tsub.add_parser("export", help="write the trace in another format (perfetto) or draw it (diagrams)",
                        description="Write the trace in another format, or draw one view of it. Formats: "
                                    + "; ".join(f"{k}: {v.help}" for k, v in EXPORT_FORMATS.items())
                                    + "; dot, svg, png, mermaid: a diagram of --view (svg and png need "
                                      "Graphviz's `dot` program).",
                        epilog="Views: lifecycle (one request across processes and rounds), round (a round's "
                               "batch, a row per token), kv (the KV pool's slots), radix (the radix tree), "
                               "admission (a round's PrefillAdder: each candidate against each budget; --rid "
                               "optional). "
                               "Example: minisgl trace export DIR --view lifecycle --rid RID --format svg")
    e.add_argument("dir", help="the trace folder")
    e.add_argument("--format", choices=sorted(EXPORT_FORMATS) + list(FORMATS), default=None,
                   help="output format (default: perfetto; svg when --view is given)")
    e.add_argument("--view", choices=VIEWS, default=None,
                   help="the diagram to draw (default: lifecycle); perfetto ignores it")
    e.add_argument("--rid", help="the request to follow (a unique prefix will do)")
    e.add_argument("--round", type=int, default=None,
                   help="round, kv, radix: the round to draw (default: the request's first round, or the "
                        "last); admission: the round to draw (default: the first round with admission "
                        "events, for --rid the first it waited in); lifecycle: a round to draw in full and "
                        "outline")
    e.add_argument("--all-rounds", action="store_true",
                   help="lifecycle: do not fold runs of decode rounds; round, kv, radix: draw every round; "
                        "admission: every round with admission events")
    e.add_argument("--server", default=None, metavar="NAME",
                   help="a merged trace (`trace merge`): the server whose rounds the round, kv, radix and "
                        "admission views draw (default: decode); the lifecycle spans every server")
    e.add_argument("--lang", choices=("en", "zh"), default="en",
                   help="the language of a diagram's words (zh: Chinese, as on the course's Chinese pages; "
                        "token text and the engine's names stay as the trace has them)")
    e.add_argument("-o", "--output",
                   help="the file to write; '-' for stdout (default: DIR/trace<suffix>, or "
                        "DIR/<view>[-RID][-roundN].<dot|svg|png|mmd>)")
    e.set_defaults(func=_export)


def _usage(p: argparse.ArgumentParser) -> int:
    p.print_help()
    return 2


def _guard(name: str, fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Run a subcommand; a trace that cannot be read is one line on stderr and exit status 2."""

    def run(args: argparse.Namespace) -> int:
        from tracer.reader import TraceError

        try:
            return fn(args)
        except TraceError as e:
            print(f"minisgl trace {name}: error: {e}", file=sys.stderr)
            return 2
        except OSError as e:
            what = f"{e.strerror or e}: {e.filename or ''}".rstrip(": ")
            print(f"minisgl trace {name}: error: {what}", file=sys.stderr)
            return 2

    return run


def _show_impl(args: argparse.Namespace) -> int:
    from rich.console import Console

    from tracer.reader import load_trace
    from tracer.show import find_rid, show

    trace = load_trace(args.dir)
    rid = find_rid(trace, args.rid) if args.rid else None  # a bad --rid fails before any table is printed
    show(trace, Console(), rid)
    return 0


def _check_impl(args: argparse.Namespace) -> int:
    from tracer.check import check_trace, summary
    from tracer.reader import load_trace

    trace = load_trace(args.dir)
    for w in trace.warnings:
        print(f"warning: {w}", file=sys.stderr)
    failures = check_trace(trace)
    if not failures:
        print(f"trace OK: {summary(trace)}")
        return 0
    for line in failures:
        print(line)
    print(f"trace FAILED: {len(failures)} problem(s) in {summary(trace)}")
    return 1


def _export_impl(args: argparse.Namespace) -> int:
    from tracer.reader import load_trace

    name = args.format or ("svg" if args.view else "perfetto")
    if name not in EXPORT_FORMATS:
        from tracer.reader import TraceError
        from tracer.servers import pick_server

        trace = load_trace(args.dir)
        if (args.view or "lifecycle") != "lifecycle" or args.server:  # one server's rounds
            try:
                trace = pick_server(trace, args.server)
            except ValueError as e:
                raise TraceError(str(e)) from None
        return _diagram(args, name, trace)
    fmt = EXPORT_FORMATS[name]
    text = fmt.render(load_trace(args.dir))
    if args.output == "-":
        sys.stdout.write(text)
        return 0
    path = Path(args.output) if args.output else Path(args.dir) / f"trace{fmt.suffix}"
    path.write_text(text, encoding="utf-8")
    print(f"wrote {path} ({name}, {len(text)} bytes)")
    return 0


def _diagram(args: argparse.Namespace, fmt: str, trace) -> int:
    """--format dot|svg|png|mermaid: draw --view (lifecycle by default) with tracer.diagrams."""
    from tracer.diagrams import SUFFIX, render_diagram
    from tracer.diagrams.select import resolve_rid

    view = args.view or "lifecycle"
    out = render_diagram(trace, view, fmt, rid=args.rid, round=args.round, all_rounds=args.all_rounds,
                         lang=args.lang)
    data = out if isinstance(out, bytes) else out.encode("utf-8")
    if args.output == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return 0
    if args.output:
        path = Path(args.output)
    else:
        rid = resolve_rid(trace, args.rid)
        parts = ([view] + ([rid[:8]] if rid else [])
                 + ([f"round{args.round}"] if args.round is not None else []))
        path = Path(args.dir) / ("-".join(parts) + SUFFIX[fmt])
    path.write_bytes(data)
    print(f"wrote {path} ({view}, {fmt}, {len(data)} bytes)")
    return 0


def _merge_impl(args: argparse.Namespace) -> int:
    from tracer.reader import TraceError
    from tracer.servers import merge_traces

    names = args.names or (["prefill", "decode"] if len(args.dirs) == 2 else None)
    if names is None or len(names) != len(args.dirs):
        raise TraceError(f"give --names, one name for each of the {len(args.dirs)} folders")
    count = merge_traces([Path(d) for d in args.dirs], names, Path(args.output))
    print(f"wrote {args.output} ({count} events of {', '.join(names)})")
    return 0


_show = _guard("show", _show_impl)
_merge = _guard("merge", _merge_impl)
_check = _guard("check", _check_impl)
_export = _guard("export", _export_impl)
