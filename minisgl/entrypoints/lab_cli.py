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
        description="Labs: each swaps one component of the engine for your own file "
                    "(MINISGL_LAB=COMPONENT=FILE) and grades it: its unit tests, a differential check "
                    "against the engine's own component where the interface is pure, and the lab's scenarios "
                    "run on the real engine, whose traces must equal the reference traces event by event.",
    )
    p.add_argument("--dir", default=None, metavar="DIR",
                   help="the workspace (default ./minisgl-labs, or $MINISGL_LABS_DIR)")
    s = p.add_subparsers(dest="lab_command", metavar="COMMAND")
    s.add_parser("list", help="every lab, its lesson and scenario").set_defaults(func=_list)
    s.add_parser("status", help="a table of every lab's state in the workspace").set_defaults(func=_status)
    for name, fn, what in (("start", _start,
                            "copy the lab's starter file, README and tests into the workspace"),
                           ("test", _test, "run the lab's unit tests on your file"),
                           ("hint", _hint, "show the next hint"),
                           ("reset", _reset, "restore the starter file (your file is kept as FILE.bak)")):
        c = s.add_parser(name, help=what, description=what[0].upper() + what[1:] + ".")
        c.add_argument("name", help="the lab (see `minisgl lab list`)")
        if name == "reset":
            c.add_argument("--yes", action="store_true", help="do not ask before replacing your file")
        c.set_defaults(func=fn)
    g = s.add_parser("grade", help="unit tests, the differential check, then the scenarios' traces",
                     description="Grade a lab: its unit tests; for a component with a pure interface, a "
                                 "differential check (your component and the engine's on the same generated "
                                 "calls, the shortest failing sequence printed); then the lab's scenarios on "
                                 "the real engine with your file swapped in. Prints the score first, then "
                                 "the first difference found and an SVG of it, expected beside got.")
    g.add_argument("name", nargs="?", help="the lab (omit with --all)")
    g.add_argument("--all", action="store_true", help="grade every started lab")
    g.add_argument("--json", nargs="?", const="results.json", default=None, metavar="FILE",
                   help="also write an autograder result file (Gradescope's results.json shape; default "
                        "FILE: results.json)")
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
    from minisgl.labs.catalog import RENAMED, UnknownLab, get

    if (new := RENAMED.get(name.replace("-", "_"))) is not None:
        print(f"minisgl lab: note: lab {name} is now called {new} (after the component you write)",
              file=sys.stderr)
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
          f"  lesson: http://127.0.0.1:8000/lessons/{lab.lesson}/ (`make lessons-serve` serves the course)\n"
          f"  graded on the scenarios: {', '.join(lab.scenarios)}\n"
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
    from minisgl.labs.proc import exit_on_sigterm

    exit_on_sigterm()  # its children run in sessions of their own: stop them too
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
    why = " (it fits what your last grade saw diverge)" if hint[2] else ""
    print(f"hint {hint[0]} of {len(lab.hints)}{why}: {hint[1]}")
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
    from minisgl.labs.proc import exit_on_sigterm

    exit_on_sigterm()  # its children run in sessions of their own: stop them too
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
        ws.record_grade(lab, g.score, g.divergence())
        _print_grade(g, out)
    if args.json:
        _write_results(args.json, grades, [lab for lab in all_labs() if lab not in labs] if args.all else [])
    return 0 if grades and all(g.score == 100 for g in grades) else 1


def _print_grade(g, out: Path) -> None:
    """The verdict first (score, each part in one line, then what the first failing check saw); the unit
    tests' own output goes to a file, so it never pushes the verdict off the screen."""
    from minisgl.labs.grade import points

    pts, parts, lab = points(g.lab), g.parts(), g.lab
    print(f"score: {g.score:g}/100")
    print(f"  unit tests    {parts['tests']:>5g}/{pts['tests']:<3} {g.tests.passed} of {g.tests.total} passed"
          + (" (stopped at the time limit)" if g.tests.timed_out else ""))
    if g.differential is not None:
        d = g.differential
        print(f"  differential  {parts['differential']:>5g}/{pts['differential']:<3} "
              f"{'PASS' if d.ok else 'FAIL'}: {d.summary}")
    print(f"  trace         {parts['trace']:>5g}/{pts['trace']:<3} {'PASS' if g.trace.ok else 'FAIL'}: "
          f"{g.trace.summary}")
    if g.differential is not None and not g.differential.ok and g.differential.example:
        print("\ndifferential check, " + g.differential.report().lstrip())
    if g.trace.report:
        print("\n" + g.trace.report)
    if g.trace.svg is not None:
        print(f"drawn expected | got: {g.trace.svg}")
    log = out / "unit-tests.txt"
    out.mkdir(parents=True, exist_ok=True)
    log.write_text(g.tests.output, encoding="utf-8")
    failing = g.tests.failing()
    print(f"\nunit tests' output: {log}" + (f" (failing: {', '.join(failing)})" if failing else ""))
    if g.score < 100:
        print(f"next: `minisgl lab hint {lab.name}` gives the hint that fits what diverged")
    print()


def _write_results(path: str, grades, unstarted) -> None:
    from minisgl.labs.grade import points

    tests = [t for g in grades for t in g.results_json_tests()]
    for lab in unstarted:
        tests += [{"name": f"{lab.name}: {part}", "score": 0, "max_score": pts, "output": "not started"}
                  for part, pts in points(lab).items()]
    result = {"score": round(sum(t["score"] for t in tests), 2), "tests": tests}
    Path(path).write_text(json.dumps(result, indent=2), encoding="utf-8")
    print(f"wrote {path} ({len(tests)} tests, score {result['score']:g})")
