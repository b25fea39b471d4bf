"""How strong is a lab's grade? mutmut (a mutation testing tool) makes every small change it knows to the
lines a learner writes in the engine's own component (an operator, a comparison, a number, a name, a call's
argument...), and each changed file is graded as a learner's file would be: the differential check, the traces
of the lab's scenarios and, for what both let pass, the unit tests (referee.py).

    python -m minisgl.labs.mutants LAB [LAB ...] [--every N] [--json FILE]     (make lab-mutants)

A mutant that every part lets pass is either a gap in the grade or *equivalent* (it cannot change what the
component does); each lab lists its equivalent ones with the reason, in its catalog folder's equivalent.py
(EQUIVALENT: {mutant id: why}). The printed table is the one on the labs page.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import json
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from minisgl.labs.bugs import ROOT, as_learner_file, learner_functions


@dataclass
class Mutant:
    id: str  # function and a number: stable while the function's code is unchanged
    function: str
    line: int  # in the engine's file
    before: str
    after: str
    caught_by: str = ""  # differential, trace, tests, or "" (survived)
    why: str = ""  # what the first failing part said, or why an equivalent mutant cannot matter


def function_lines(source: str, names: list[str]) -> dict[str, range]:
    """Each named function's body in the engine's file, its docstring left out. A method slot's function
    (PrefillAdder.add_one_req) may be named without its class in the starter: matched by its last part."""
    tree = ast.parse(source)
    found: dict[str, range] = {}

    def visit(body, prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                visit(node.body, f"{prefix}{node.name}.")
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                full = prefix + node.name
                if full in names or (node.name in names and "." not in node.name):
                    stmts = node.body
                    if stmts and isinstance(stmts[0], ast.Expr) and isinstance(stmts[0].value, ast.Constant):
                        stmts = stmts[1:]  # the docstring
                    if stmts:
                        found[full] = range(stmts[0].lineno, node.end_lineno + 1)

    visit(tree.body, "")
    return found


def make_mutants(lab) -> tuple[list[Mutant], list[str]]:
    """(every mutant's description, its changed source), from mutmut's own mutation operators."""
    import libcst as cst
    from mutmut.mutation.file_mutation import create_mutations, deep_replace
    from mutmut.utils.file_utils import change_cwd

    from minisgl.labs.components import get

    component = get(lab.component)
    path = ROOT / component.home
    source = path.read_text(encoding="utf-8")
    spans = function_lines(source, learner_functions(lab))
    lines = {n for r in spans.values() for n in r}
    with change_cwd(ROOT):  # mutmut reads its settings from the project's pyproject.toml
        module, mutations, _, _ = create_mutations(str(path), source, covered_lines=lines)
    wrapper = cst.metadata.MetadataWrapper(module, unsafe_skip_copy=True)
    positions = wrapper.resolve(cst.metadata.PositionProvider)
    old_lines = source.splitlines()
    mutants, sources, counts = [], [], {}
    for m in mutations:
        code = deep_replace(module, m.original_node, m.mutated_node).code
        line = positions[m.original_node].start.line if m.original_node in positions else 0
        function = next((f for f, r in spans.items() if line in r), "?")
        counts[function] = counts.get(function, 0) + 1
        changed = [d for d in difflib.unified_diff(old_lines, code.splitlines(), lineterm="", n=0)
                   if d[:1] in "+-" and not d.startswith(("+++", "---"))]
        before = " | ".join(d[1:].strip() for d in changed if d.startswith("-"))
        after = " | ".join(d[1:].strip() for d in changed if d.startswith("+"))
        mutants.append(Mutant(f"{function}#{counts[function]}", function, line, before, after))
        sources.append(as_learner_file(component, code))
    return mutants, sources


def equivalent(lab) -> dict[str, str]:
    from minisgl.labs.catalog import HERE

    if not (HERE / lab.name / "equivalent.py").exists():
        return {}
    import importlib

    return importlib.import_module(f"minisgl.labs.catalog.{lab.name}.equivalent").EQUIVALENT


@dataclass
class Table:
    lab: str
    mutants: int
    equivalent: int
    by_differential: int
    by_trace: int
    by_tests_only: int
    survived: int
    seconds: float

    @property
    def real(self) -> int:
        return self.mutants - self.equivalent

    def rate(self) -> float:
        """The share of real (non-equivalent) mutants the differential check or the trace kills."""
        return (self.by_differential + self.by_trace) / self.real if self.real else 1.0

    def row(self) -> str:
        return (f"| {self.lab} | {self.mutants} | {self.equivalent} | {self.by_differential} | "
                f"{self.by_trace} | {self.by_tests_only} | {self.survived} | {100 * self.rate():.1f} % |")


HEADER = ("| lab | mutants | equivalent | killed by the differential check | by the trace | "
          "by the unit tests only | survived | killed by differential or trace |\n"
          "|---|---|---|---|---|---|---|---|")


def run_lab(lab, every: int = 1, say=print, engine=None, only: set[str] | None = None
            ) -> tuple[Table, list[Mutant]]:
    """Grade every `every`th mutant of the lab (or those named in `only`); `engine`: a loaded Engine to
    fork (else one is loaded)."""
    from minisgl.labs.referee import Referee

    start = time.monotonic()
    mutants, sources = make_mutants(lab)
    mutants, sources = mutants[::every], sources[::every]
    if only:
        unknown = only - {m.id for m in mutants}
        if unknown:
            raise SystemExit(f"{lab.name} has no mutant {', '.join(sorted(unknown))}")
        mutants, sources = map(list, zip(*[(m, s) for m, s in zip(mutants, sources) if m.id in only]))
    known = equivalent(lab)
    referee = Referee(lab, timeout=30.0, engine=engine)
    folder = Path(tempfile.mkdtemp(prefix=f"minisgl-mutants-{lab.name}-"))
    try:
        for i, (m, src) in enumerate(zip(mutants, sources), 1):
            path = folder / f"mutant_{i}.py"
            path.write_text(src, encoding="utf-8")
            v = referee.judge(path, ("differential", "trace"))
            if not v.caught_by():
                v.tests = referee.tests(path)
            m.caught_by = v.caught_by()
            if m.caught_by == "tests" and m.id in known:  # the unit tests call the method alone: stricter
                m.caught_by = ""  # than the engine, around which the change cannot show
            m.why = getattr(v, m.caught_by) if m.caught_by else known.get(m.id, "")
            verdict = m.caught_by or ("equivalent" if m.id in known else "SURVIVED")
            say(f"[{i}/{len(mutants)}] {m.id:<32} {verdict}")
    finally:
        referee.close()
    return tabulate(lab, mutants, time.monotonic() - start), mutants


def tabulate(lab, mutants: list[Mutant], seconds: float) -> Table:
    known = equivalent(lab)
    n = {part: sum(m.caught_by == part for m in mutants) for part in ("differential", "trace", "tests")}
    eq = sum(1 for m in mutants if not m.caught_by and m.id in known)
    survived = sum(1 for m in mutants if not m.caught_by and m.id not in known)
    return Table(lab.name, len(mutants), eq, n["differential"], n["trace"], n["tests"], survived,
                 round(seconds, 1))


def merged(lab, regraded: list[Mutant], seconds: float) -> tuple[Table, list[Mutant]]:
    """The lab's recorded run with `regraded` mutants graded again (after a grading scenario was added: a
    mutant the trace killed before is killed still, as the earlier scenarios run first)."""
    path = lab.folder / "mutants.json"
    data = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    if "verdicts" not in data:
        raise SystemExit(f"{path} keeps no verdict per mutant: grade every mutant (without --only) first")
    again = {m.id: m for m in regraded}
    mutants = [again.get(d["id"]) or Mutant(**d) for d in data["verdicts"]]
    return tabulate(lab, mutants, data["seconds"] + seconds), mutants


def record(lab, table: Table, mutants: list[Mutant], every: int) -> Path:
    """The lab's measured table, kept beside it (catalog/<lab>/mutants.json) for the labs page."""
    path = lab.folder / "mutants.json"
    data = {**asdict(table), "every": every,
            "survivors": [f"{m.id}: {m.before} -> {m.after}"
                          for m in mutants if not m.caught_by and not m.why],
            "verdicts": [asdict(m) for m in mutants]}
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return path


def recorded(lab) -> Table | None:
    path = lab.folder / "mutants.json"
    if not path.exists():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    table = Table(**{k: data[k] for k in Table.__dataclass_fields__})
    # a survivor since listed as equivalent (with its reason) counts as one, without a new run
    known = equivalent(lab)
    listed = sum(1 for s in data.get("survivors", []) if s.split(":")[0] in known)
    table.equivalent, table.survived = table.equivalent + listed, table.survived - listed
    return table


def main(argv: list[str] | None = None) -> int:
    from minisgl.labs.catalog import all_labs, get

    p = argparse.ArgumentParser(prog="python -m minisgl.labs.mutants", description=__doc__.split("\n\n")[0])
    p.add_argument("labs", nargs="*", help="the labs (default: every lab)")
    p.add_argument("--every", type=int, default=1, metavar="N", help="grade every Nth mutant only (a sample)")
    p.add_argument("--json", default=None, metavar="FILE", help="also write every mutant and verdict as JSON")
    p.add_argument("--record", action="store_true",
                   help="write each lab's table to its catalog folder (mutants.json), shown on the labs page")
    p.add_argument("--only", default=None, metavar="ID,ID",
                   help="grade only these mutants (ids as printed, e.g. TokenizerManager.handle_loop#3) and, "
                   "with --record, merge their new verdicts into the lab's recorded run")
    args = p.parse_args(argv)
    if args.every < 1:
        p.error("--every takes a whole number of 1 or more")
    labs = [get(n) for n in args.labs] if args.labs else all_labs()
    only = set(args.only.split(",")) if args.only else None
    if only and len(labs) != 1:
        p.error("--only names the mutants of one lab: give that lab")
    tables, report = [], {}
    for lab in labs:
        print(f"== {lab.name}: mutating {', '.join(learner_functions(lab))}", flush=True)
        table, mutants = run_lab(lab, args.every, say=lambda s: print(s, flush=True), only=only)
        if only and args.record:
            table, mutants = merged(lab, mutants, table.seconds)
        tables.append(table)
        report[lab.name] = {"table": asdict(table), "mutants": [asdict(m) for m in mutants]}
        if args.record:
            record(lab, table, mutants, args.every)
        for m in mutants:
            if not m.caught_by:
                tag = "equivalent" if m.why else "SURVIVED"
                why = f"  [{m.why}]" if m.why else ""
                print(f"  {tag} {m.id} (line {m.line}): {m.before}  ->  {m.after}{why}")
    print("\n" + HEADER)
    for t in tables:
        print(t.row())
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=2), encoding="utf-8")
    return 0 if all(t.survived == 0 for t in tables) else 1


if __name__ == "__main__":
    sys.exit(main())
