"""Plausible one-line bugs, written from what learners get wrong (a boundary, an order, a forgotten piece of
bookkeeping), kept per lab in its catalog folder as `bugs.py` (BUGS: a tuple of Bug). Each is the engine's
own file with one line changed, turned into a learner's file: the lab's grade must take marks for it, through
the differential check or the trace, not only through a unit test (tests/labs/test_bugs.py)."""

from __future__ import annotations

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


def as_learner_file(component, source: str) -> str:
    """The engine's file (changed or not) in the shape of a learner's file: it defines every name the
    component needs (a method is taken off its class)."""
    tail = [f"{slot.name} = {slot.owner.partition(':')[2]}.{slot.name}"
            for slot in component.slots if ":" in slot.owner]
    return source + ("\n\n# the names the lab swaps in\n" + "\n".join(tail) + "\n" if tail else "")


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
