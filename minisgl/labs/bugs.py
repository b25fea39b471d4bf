"""Plausible one-line bugs, written from what learners get wrong (a boundary, an order, a forgotten piece of
bookkeeping), kept per lab in its catalog folder as `bugs.py` (BUGS: a tuple of Bug). Each is the engine's
own file with one line changed, turned into a learner's file: the lab's grade must take marks for it, through
the differential check or the trace, not only through a unit test (tests/labs/test_bugs.py)."""

from __future__ import annotations

import ast
import importlib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Bug:
    name: str  # a short id: the file name of the learner's file it makes
    what: str  # the mistake, as a learner would describe it
    old: str  # text in the engine's file that occurs exactly once
    new: str


def home_source(component) -> str:
    return (ROOT / component.home).read_text(encoding="utf-8")


def learner_functions(lab) -> list[str]:
    """The functions the learner writes: those the starter leaves as `raise NotImplementedError("TODO...")`
    (Class.method for a method)."""
    tree = ast.parse(lab.starter.read_text(encoding="utf-8"))
    out: list[str] = []

    def visit(body, prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                visit(node.body, f"{prefix}{node.name}.")
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if any(isinstance(n, ast.Raise) and "TODO" in ast.unparse(n) for n in ast.walk(node)):
                    out.append(prefix + node.name)

    visit(tree.body, "")
    return out


def starter_names(lab) -> list[str]:
    """Every name the starter itself defines at its top level (a function, a class, a constant): a learner's
    file has its own copy of each; the rest it imports from the engine."""
    names = []
    for node in ast.parse(lab.starter.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names += [t.id for t in targets if isinstance(t, ast.Name)]
    return names


def _lab_of(component):
    from minisgl.labs.catalog import all_labs

    return next(lab for lab in all_labs() if lab.component == component.id)


def as_learner_file(component, source: str) -> str:
    """The engine's file (changed or not) in the shape of a learner's file: it defines every name the
    component needs (a method is taken off its class), every name the starter defines and the file's own
    helper functions; every other name (a class, a constant, an import) is the engine's own, as in a
    learner's file that imports the engine's types (a class defined here again would be a second class: the
    engine's `is` and `==` on its enum values would fail)."""
    module = component.home[: -len(".py")].replace("/", ".")
    functions = [n.name for n in ast.parse(source).body
                 if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    keep = sorted({*(slot.name for slot in component.slots), *starter_names(_lab_of(component)), *functions})
    tail = [f"{slot.name} = {slot.owner.partition(':')[2]}.{slot.name}"
            for slot in component.slots if ":" in slot.owner]
    tail += ["import importlib as _importlib",
             f"for _name, _value in vars(_importlib.import_module({module!r})).items():",
             f"    if not _name.startswith('__') and _name not in {tuple(keep)!r}:",
             "        globals()[_name] = _value"]
    head = "\n\n# the names the lab swaps in; every other name is the engine's own\n"
    return source + head + "\n".join(tail) + "\n"


def apply(component, bug: Bug) -> str:
    source = home_source(component)
    count = source.count(bug.old)
    if count != 1:
        raise ValueError(f"bug {bug.name}: {bug.old!r} occurs {count} times in {component.home}, not once")
    return as_learner_file(component, source.replace(bug.old, bug.new))


def write(component, bug: Bug, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{bug.name}.py"
    path.write_text(apply(component, bug), encoding="utf-8")
    return path


def catalog(lab_name: str) -> tuple[Bug, ...]:
    from minisgl.labs.catalog import HERE

    if not (HERE / lab_name / "bugs.py").exists():
        return ()
    return importlib.import_module(f"minisgl.labs.catalog.{lab_name}.bugs").BUGS


def main(argv: list[str] | None = None) -> int:
    """`python -m minisgl.labs.bugs [LAB ...]` (make lab-bugs): every bug of each catalog graded as a
    learner's file, each part of the grade run, one line per bug."""
    import argparse
    import tempfile

    from minisgl.labs.catalog import all_labs, get
    from minisgl.labs.components import get as get_component
    from minisgl.labs.referee import Referee

    p = argparse.ArgumentParser(prog="python -m minisgl.labs.bugs", description=main.__doc__)
    p.add_argument("labs", nargs="*", help="the labs (default: every lab)")
    args = p.parse_args(argv)
    missed = 0
    for lab in [get(n) for n in args.labs] if args.labs else all_labs():
        referee, folder = Referee(lab), Path(tempfile.mkdtemp(prefix=f"minisgl-bugs-{lab.name}-"))
        print(f"== {lab.name}: {len(catalog(lab.name))} bugs")
        try:
            for bug in catalog(lab.name):
                v = referee.judge(write(get_component(lab.component), bug, folder), stop_at_first=False)
                parts = [f"{part} {'caught' if getattr(v, part) else 'passed'}"
                         for part in ("differential", "trace", "tests") if getattr(v, part) is not None]
                missed += not (v.differential or v.trace)
                print(f"  {bug.name:<32} {', '.join(parts)}  ({bug.what})", flush=True)
        finally:
            referee.close()
    print(f"{missed} bug(s) caught by neither the differential check nor a trace")
    return 1 if missed else 0


if __name__ == "__main__":
    import sys

    sys.exit(main())
