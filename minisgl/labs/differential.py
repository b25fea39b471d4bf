"""The differential check: the learner's component and the engine's own, driven side by side through the same
operations that Hypothesis generates, compared after every step (each return value and the state the
component keeps). The first disagreement is shrunk to the shortest sequence that still shows it and printed
as code the learner can paste and run.

A lab with a pure interface has a `differential.py` in its catalog folder that defines:

    operations()                 a Hypothesis strategy of operation lists
    drive(ops, mine, ref, log)   runs them on both, calling log.step(code, expected) for each call and
                                 raising Mismatch at the first difference

`mine` and `ref` are namespaces of the component's names (minisgl.labs.testing.component). Seeds are fixed
(derandomized), so the same file gets the same verdict on every run and machine.

Run as `python -m minisgl.labs.differential LAB REPORT.json` (a child of `minisgl lab grade`, with
MINISGL_LAB naming the learner's file), it writes the verdict as JSON.
"""

from __future__ import annotations

import importlib
import json
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any, Callable

MAX_EXAMPLES = 500  # generated operation sequences per grade (before shrinking a failure)


class Mismatch(AssertionError):
    """The learner's component answered or stood differently from the engine's at one step."""

    def __init__(self, what: str, expected: Any, got: Any, code: str = ""):
        super().__init__(f"{what}: expected {expected}, got {got}")
        self.what, self.expected, self.got = what, expected, got
        self.code = code  # the call that answered differently (empty: the state after the last call differs)
        self.lines: list[str] = []  # the replayable example, set by check()


class Log:
    """The calls made so far, as code, each with the engine's answer as a comment."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def step(self, code: str, expected: Any = None) -> None:
        self.lines.append(code if expected is None else f"{code:<44} # engine: {expected}")


@dataclass(frozen=True)
class Raised:
    """What a call that raised returns in the comparison: the exception's type, its message aside."""

    kind: str

    def __repr__(self) -> str:
        return f"raises {self.kind}"


def call(code: str, ref_fn: Callable[[], Any], mine_fn: Callable[[], Any], show: Callable[[Any], Any] = repr,
         about: str = ""):
    """Call the reference, then the learner's; both must return the same shown value or raise the same type.
    `code` is the call as the example prints it, `about` what is compared.
    Returns (the reference's result, the learner's)."""
    what = f"{code} {about}".strip()
    try:
        ref = ref_fn()
        expected = show(ref)
    except Exception as e:  # the engine refuses this call: the learner's must refuse it the same way
        ref = expected = Raised(type(e).__name__)
    try:
        mine = mine_fn()
        got = shown = show(mine)
    except Mismatch:
        raise
    except Exception as e:
        mine, got, shown = None, Raised(type(e).__name__), f"raises {type(e).__name__}: {e}"
    if got != expected:
        raise Mismatch(what, expected, shown, code)
    return ref, mine


def observe(what: str, fn: Callable[[], Any]) -> Any:
    """Read the learner's component's state; a read that raises (a node left as None, say) is a mismatch."""
    try:
        return fn()
    except Exception as e:
        raise Mismatch(what, "a state that can be read", f"raises {type(e).__name__}: {e}") from None


def same(what: str, expected: Any, got: Any) -> None:
    if expected != got:
        raise Mismatch(what, expected, got)


@dataclass
class DiffResult:
    ok: bool
    summary: str
    what: str = ""
    expected: str = ""
    got: str = ""
    example: list[str] = field(default_factory=list)
    examples: int = 0

    def report(self) -> str:
        if self.ok:
            return ""
        lines = [f"  {self.what}:", f"    expected {self.expected}", f"    got      {self.got}",
                 "  the shortest sequence that shows it (paste it after your file's code to replay it):"]
        return "\n".join(lines + ["    " + x for x in self.example])


def lab_module(lab_name: str) -> ModuleType | None:
    """The lab's differential.py, or None for a lab that has none."""
    from minisgl.labs.catalog import HERE

    if not (HERE / lab_name / "differential.py").exists():
        return None
    return importlib.import_module(f"minisgl.labs.catalog.{lab_name}.differential")


def reference_names(component_id: str) -> SimpleNamespace:
    """The engine's own names for the component, whatever is installed now."""
    from minisgl.labs import swap
    from minisgl.labs.components import get

    slots = get(component_id).slots  # an installed swap keeps what it replaced in swap._originals
    return SimpleNamespace(**{s.name: swap._originals.get((s.owner, s.name), s.reference()) for s in slots})


def check(module: ModuleType, mine: SimpleNamespace, ref: SimpleNamespace,
          max_examples: int = MAX_EXAMPLES) -> DiffResult:
    from hypothesis import HealthCheck, Phase, Verbosity, example, given, settings

    def prop(ops):
        log = Log()
        try:
            module.drive(ops, mine, ref, log)
        except Mismatch as m:
            m.lines = list(log.lines)
            if m.code:
                m.lines.append(f"{m.code:<44} # engine: {m.expected}   <- yours: {m.got}")
            raise
        except Exception as e:  # what the learner's component returned could not even be compared
            m = Mismatch("after the last call, comparing with the engine's", "comparable results",
                         f"raises {type(e).__name__}: {e}")
            m.lines = list(log.lines)
            raise m from None

    # a lab's EXAMPLES (boundaries that generation reaches too rarely) are always tried first
    for ops in reversed(getattr(module, "EXAMPLES", [])):
        prop = example(ops)(prop)
    prop = given(module.operations())(prop)
    prop = settings(derandomize=True, database=None, max_examples=max_examples, deadline=None,
                    print_blob=False, report_multiple_bugs=False, suppress_health_check=list(HealthCheck),
                    verbosity=Verbosity.quiet, phases=(Phase.explicit, Phase.generate, Phase.shrink))(prop)
    try:
        prop()
    except Mismatch as m:
        return DiffResult(False, f"your component differs from the engine's "
                                 f"({len(m.lines)} lines replay it): {m.what}",
                          m.what, str(m.expected), str(m.got), m.lines)
    return DiffResult(True, f"your component agrees with the engine's on {max_examples} generated sequences",
                      examples=max_examples)


def check_file(lab_name: str, component_id: str, learner: Path | None = None,
               max_examples: int = MAX_EXAMPLES) -> DiffResult:
    """Check the component MINISGL_LAB installs (or `learner`, loaded without installing) against the
    engine's."""
    from minisgl.labs import swap
    from minisgl.labs.components import get
    from minisgl.labs.testing import component

    module = lab_module(lab_name)
    assert module is not None, f"lab {lab_name} has no differential check"
    if learner is None:
        mine = component(component_id)
    else:
        loaded = swap.load_file(learner)
        swap.check(get(component_id), loaded, learner)
        mine = SimpleNamespace(**{name: getattr(loaded, name) for name in get(component_id).names()})
    return check(module, mine, reference_names(component_id), max_examples)


def main(argv: list[str]) -> int:
    from minisgl.labs.catalog import get
    from minisgl.labs.swap import LabSwapError

    lab_name, report = argv
    lab = get(lab_name)
    try:
        result = check_file(lab.name, lab.component)
    except LabSwapError as e:
        result = DiffResult(False, f"the engine cannot use your file: {e}")
    Path(report).write_text(json.dumps(asdict(result)), encoding="utf-8")
    return 0 if result.ok else 1


if __name__ == "__main__":  # run as a module it is __main__: the labs raise the package module's Mismatch
    from minisgl.labs.differential import main as package_main

    sys.exit(package_main(sys.argv[1:]))
