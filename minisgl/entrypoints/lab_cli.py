"""`minisgl lab list | start | test | grade | hint | status | reset`: write one component of the engine, run
the real engine with it, and see the first event where your trace leaves the reference."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "lab", help="labs: write one engine component and grade it by its trace",
        description="Labs: each swaps one component of the engine for your own file (MINISGL_LAB=COMPONENT=FILE) "
                    "and grades it twice: its unit tests, and the lab's scenario run on the real engine, whose "
                    "trace must equal the reference trace event by event.",
    )
    p.add_argument("--dir", default=None, metavar="DIR",
                   help="the workspace (default ./minisgl-labs, or $MINISGL_LABS_DIR)")
    s = p.add_subparsers(dest="lab_command", metavar="COMMAND")
    s.add_parser("list", help="every lab, its lesson and scenario").set_defaults(func=_list)
    s.add_parser("status", help="a table of every lab's state in the workspace").set_defaults(func=_status)
    for name, fn, what in (("start", _start, "copy the lab's starter file, README and tests into the workspace"),
                           ("test", _test, "run the lab's unit tests on your file"),
                           ("hint", _hint, "show the next hint"),
                           ("reset", _reset, "restore the starter file (your file is kept as FILE.bak)")):
        c = s.add_parser(name, help=what, description=what[0].upper() + what[1:] + ".")
        c.add_argument("name", help="the lab (see `minisgl lab list`)")
        if name == "reset":
            c.add_argument("--yes", action="store_true", help="do not ask before replacing your file")
        c.set_defaults(func=fn)
    g = s.add_parser("grade", help="unit tests, then the scenario's trace against the reference",
                     description="Grade a lab: its unit tests, then its scenario on the real engine with your file "
                                 "swapped in; prints the score, or the first event where your trace leaves the "
                                 "reference and the path of an SVG of that round, expected beside got.")
    g.add_argument("name", nargs="?", help="the lab (omit with --all)")
    g.add_argument("--all", action="store_true", help="grade every started lab")
    g.add_argument("--json", nargs="?", const="results.json", default=None, metavar="FILE",
                   help="also write an autograder result file (Gradescope's results.json shape; default FILE: "
                        "results.json)")
    g.add_argument("--file", default=None, metavar="PY", help="grade this file instead of the workspace's")
    g.add_argument("--reference-trace", default=None, metavar="DIR",
                   help="compare with this reference trace (default: the scenario run by the engine's own "
                        "components, cached like the course's traces)")
    g.set_defaults(func=_grade)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def _ws(args):
    from minisgl.labs.workspace import Workspace

    return Workspace(args.dir)


def _lab(name: str):
    from minisgl.labs.catalog import UnknownLab, get

    try:
        return get(name)
    except UnknownLab as e:
        raise SystemExit(f"minisgl lab: error: {e.args[0]}") from None


def _list(args) -> int:
    from minisgl.labs.catalog import all_labs

    for lab in all_labs():
        print(f"{lab.name:24} {lab.title}")
        print(f"{'':24} lesson {lab.lesson} · scenario {lab.scenario}")
        print(f"{'':24} SGLang: {lab.sglang}")
    return 0


def _status(args) -> int:
    from minisgl.labs.catalog import all_labs

    ws = _ws(args)
    print(f"workspace: {ws.root.resolve()}")
    print(f"{'lab':24} {'state':12} {'hints':6} last grade")
    for lab in all_labs():
        st = ws.lab_state(lab)
        state = "not started" if not ws.started(lab) else ("edited" if ws.modified(lab) else "starter")
        grade = st.get("grade")
        print(f"{lab.name:24} {state:12} {st.get('hints', 0)}/{len(lab.hints):<4} "
              f"{'-' if grade is None else f'{grade:g}/100'}")
    return 0


def _start(args) -> int:
    from minisgl.labs.workspace import WorkspaceError

    lab = _lab(args.name)
    try:
        path = _ws(args).start(lab)
    except WorkspaceError as e:
        print(f"minisgl lab start: error: {e}", file=sys.stderr)
        return 2
    print(f"lab {lab.name}: {lab.title}\n  your file: {path}\n  read: {path.parent / 'README.md'}\n"
          f"  lesson: {lab.lesson} · scenario: {lab.scenario}\n"
          f"  next: edit the TODOs, then `minisgl lab test {lab.name}` and `minisgl lab grade {lab.name}`")
    return 0


def _learner(args, lab) -> Path:
    from minisgl.labs.workspace import WorkspaceError

    if getattr(args, "file", None):
        return Path(args.file).resolve()
    try:
        return _ws(args).require(lab).resolve()
    except WorkspaceError as e:
        raise SystemExit(f"minisgl lab: error: {e}") from None


def _test(args) -> int:
    from minisgl.labs.grade import run_tests

    lab = _lab(args.name)
    result = run_tests(lab, _learner(args, lab))
    print(result.output.rstrip())
    print(f"\n{lab.name}: {result.passed} of {result.total} unit tests passed"
          + (" (stopped at the time limit)" if result.timed_out else ""))
    return 0 if result.failed == 0 else 1


def _hint(args) -> int:
    lab = _lab(args.name)
    hint = _ws(args).next_hint(lab)
    if hint is None:
        print(f"{lab.name}: every hint ({len(lab.hints)}) was shown; the lesson {lab.lesson} and the README "
              "are next")
        return 0
    print(f"hint {hint[0]} of {len(lab.hints)}: {hint[1]}")
    return 0


def _reset(args) -> int:
    lab = _lab(args.name)
    ws = _ws(args)
    path = _learner(args, lab)
    if not args.yes:
        try:
            answer = input(f"replace {path} with the starter (yours is kept as {path.name}.bak)? [y/N] ")
        except EOFError:  # no terminal to ask: the safe answer
            answer = ""
        if answer.strip().lower() not in ("y", "yes"):
            print("left as it was")
            return 1
    backup = ws.reset(lab)
    print(f"{path} is the starter again; your version is in {backup}")
    return 0


def _grade(args) -> int:
    from minisgl.labs.catalog import all_labs
    from minisgl.labs.grade import grade

    ws = _ws(args)
    if args.all == bool(args.name):
        raise SystemExit("minisgl lab grade: error: give one lab, or --all")
    labs = [lab for lab in all_labs() if ws.started(lab)] if args.all else [_lab(args.name)]
    if args.all and not labs:
        print(f"no lab is started in {ws.root}; every lab scores 0")
    grades = []
    for lab in labs:
        learner = _learner(args, lab)
        print(f"== {lab.name}: grading {learner}", flush=True)
        out = ws.root / lab.name / "grade"
        g = grade(lab, learner, out, Path(args.reference_trace) if args.reference_trace else None)
        grades.append(g)
        ws.record_grade(lab, g.score)
        print(f"unit tests: {g.tests.passed} of {g.tests.total} passed ({g.tests.score:g}/50)")
        if g.tests.failed:
            print("\n".join(g.tests.output.rstrip().splitlines()[-25:]))
        print(f"trace: {'PASS' if g.trace.ok else 'FAIL'}: {g.trace.summary} ({g.trace.score:g}/50)")
        if g.trace.report:
            print(g.trace.report)
        if g.trace.svg is not None:
            print(f"drawn expected | got: {g.trace.svg}")
        print(f"score: {g.score:g}/100\n")
    if args.json:
        _write_results(args.json, grades, [lab for lab in all_labs() if lab not in labs] if args.all else [])
    return 0 if grades and all(g.score == 100 for g in grades) else 1


def _write_results(path: str, grades, unstarted) -> None:
    from minisgl.labs.grade import TEST_POINTS, TRACE_POINTS

    tests = [t for g in grades for t in g.results_json_tests()]
    for lab in unstarted:
        tests += [{"name": f"{lab.name}: unit tests", "score": 0, "max_score": TEST_POINTS, "output": "not started"},
                  {"name": f"{lab.name}: trace of scenario {lab.scenario}", "score": 0,
                   "max_score": TRACE_POINTS, "output": "not started"}]
    result = {"score": round(sum(t["score"] for t in tests), 2), "tests": tests}
    Path(path).write_text(json.dumps(result, indent=2), encoding="utf-8")
    print(f"wrote {path} ({len(tests)} tests, score {result['score']:g})")
