"""`minisgl scenario list | run NAME`: the course's worked examples, run on the real engine and traced."""

from __future__ import annotations

import argparse
import sys
import time


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "scenario",
        help="run the course's worked examples on the real engine, traced",
        description="Named, reproducible runs of the real engine, one concept each. Each writes a "
        "level-3 trace and says which round and request to look at.",
    )
    s = p.add_subparsers(dest="scenario_command", metavar="COMMAND")
    ls = s.add_parser(
        "list", help="list the scenarios", description="List every scenario with what it teaches."
    )
    ls.set_defaults(func=run_list)
    r = s.add_parser(
        "run",
        help="run one scenario and write its trace",
        description="Run a scenario on the bundled model (float32, greedy) and write its trace. "
        "--set and --prompt change a number first (a flag, a request's field, a prompt), so a lesson's "
        "'what if' can be answered by running it: the run prints what each request did, round by round.",
    )
    r.add_argument("name", help="the scenario (see `minisgl scenario list`)")
    r.add_argument(
        "--trace",
        dest="trace_dir",
        nargs="?",
        const=None,
        default=None,
        metavar="DIR",
        help="write the trace to DIR (default: ./minisgl-scenario-NAME-YYYYmmdd-HHMMSS)",
    )
    r.add_argument(
        "--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
        help="change a number and run again: an engine flag (chunked_prefill_size=12, max_total_tokens=64, "
        "schedule_policy=lpm) or one request's field (R2.max_new_tokens=6, R2.after_round=2, "
        "R1.ignore_eos=false); repeat for several",
    )
    r.add_argument(
        "--prompt", dest="prompts", action="append", default=[], metavar="RID=TEXT",
        help="give a request another prompt (R2=' red green'); engine scenarios only",
    )
    r.add_argument(
        "--replay", action="store_true", help="open the replay app on the trace when the run is done"
    )
    r.set_defaults(func=run_one)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def run_list(args: argparse.Namespace) -> int:
    from minisgl.scenarios import all_scenarios

    for sc in all_scenarios():
        where = "server" if sc.server is not None else "engine"
        print(f"{sc.name:<18} {sc.title} ({where})\n{'':<18} teaches: {sc.teaches}")
    return 0


def run_one(args: argparse.Namespace) -> int:
    from minisgl.labs.proc import exit_on_sigterm
    from minisgl.scenarios import UnknownScenario, get
    from minisgl.scenarios.driver import run
    from minisgl.scenarios.look import result_line
    from minisgl.scenarios.pd_server import NoRouter
    from tracer.check import check_trace
    from tracer.reader import load_trace

    from minisgl.scenarios.changes import ChangeError, change, parse_pairs, parse_value
    from minisgl.scenarios.summary import summary

    exit_on_sigterm()  # SIGTERM unwinds as Ctrl+C does: a server scenario's `minisgl serve` is stopped

    try:
        sc = get(args.name)
        sets = {k: parse_value(v) for k, v in parse_pairs(args.sets, "--set").items()}
        sc = change(sc, sets, parse_pairs(args.prompts, "--prompt"))
    except UnknownScenario as e:
        print(f"minisgl scenario run: error: {e.args[0]}", file=sys.stderr)
        return 2
    except ChangeError as e:
        print(f"minisgl scenario run: error: {e}", file=sys.stderr)
        return 2
    trace_dir = args.trace_dir or f"minisgl-scenario-{sc.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    print(
        f"scenario {sc.name}: {sc.title}\n  teaches: {sc.teaches}\n  running on the bundled model "
        f"({'a real server' if sc.server else 'the offline engine'}, float32, greedy) ...",
        flush=True,
    )
    t0 = time.perf_counter()
    try:
        outcome = run(sc, trace_dir)
    except NoRouter as e:
        print(f"minisgl scenario run: error: {e}", file=sys.stderr)
        return 2
    trace = load_trace(trace_dir)
    problems = check_trace(trace)
    print(
        f"  done in {time.perf_counter() - t0:.1f} s: {len(trace.events)} events, "
        f"{len(trace.rounds())} rounds; "
        f"trace in {trace_dir} ({'trace check OK' if not problems else f'{len(problems)} check failure(s)'})"
    )
    for rid, result in outcome.results.items():
        print("  " + result_line(rid, result))
    print("\nwhat it did:")
    for line in summary(trace):
        print(f"  {line}")
    look = sc.look_at(trace) if sc.look_at else None
    if look is not None:
        print("\nwhat to look at:")
        for line in look.lines:
            print(f"  - {line}")
        print("\ncommands:")
        print(f"  minisgl replay {trace_dir} --rid {look.rid}")
        print(f"  minisgl trace show {trace_dir} --rid {look.rid}")
        print(f"  minisgl trace export {trace_dir} --view lifecycle --rid {look.rid} --format svg")
        if look.round is not None:
            print(
                f"  minisgl trace export {trace_dir} --view round --rid {look.rid} --round {look.round} "
                "--format svg"
            )
    for line in problems:
        print(f"  check: {line}", file=sys.stderr)
    if args.replay:
        from tui.launch import run as replay

        return replay(
            argparse.Namespace(dir=trace_dir, follow=False, rid=look.rid if look else None, poll=0.5)
        )
    return 1 if problems else 0
