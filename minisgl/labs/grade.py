"""Grade a learner's file in up to three parts, each in a child process with a time limit:

- the lab's unit tests (minisgl/labs/catalog/<lab>/test_lab.py);
- the differential check, for a lab whose component has a pure interface: the learner's component and the
  engine's driven side by side through generated operations (differential.py);
- the trace: the lab's grading scenarios on the real engine with the file swapped in, each trace compared
  with the reference's event by event (trace_grade.py).

A bug the unit tests miss still costs the differential or the trace part, which weigh as much together.
"""

from __future__ import annotations

import json
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from minisgl.labs.differential import DiffResult, lab_module
from minisgl.labs.lab import Lab
from minisgl.labs.proc import lab_env, run_child
from minisgl.labs.trace_grade import TraceResult, run_trace

TEST_TIMEOUT, DIFF_TIMEOUT = 180, 180  # seconds; a 2-core machine loading the model is slow


def points(lab: Lab) -> dict[str, int]:
    """Each part's share of 100."""
    if lab_module(lab.name) is not None:
        return {"tests": 40, "differential": 30, "trace": 30}
    return {"tests": 50, "trace": 50}


@dataclass
class TestResult:
    passed: int = 0
    failed: int = 0
    output: str = ""
    timed_out: bool = False

    @property
    def total(self) -> int:
        return self.passed + self.failed

    def failing(self) -> list[str]:
        """The names of the failing tests, from pytest's short summary."""
        return [line.split("::", 1)[1].split(" ")[0] for line in self.output.splitlines()
                if line.startswith(("FAILED ", "ERROR ")) and "::" in line]


def run_tests(lab: Lab, learner: Path | None, timeout: float = TEST_TIMEOUT) -> TestResult:
    with tempfile.TemporaryDirectory(prefix="minisgl-lab-") as tmp:
        junit = Path(tmp) / "junit.xml"
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:textual-snapshot",
               "-o", "addopts=", f"--junitxml={junit}", "--rootdir", str(lab.folder), str(lab.tests)]
        child = run_child(cmd, lab_env(lab, learner), timeout)
        passed, failed = junit_counts(junit)
        return TestResult(passed, failed, child.output, timed_out=child.code is None)


def junit_counts(junit: Path) -> tuple[int, int]:
    """(passed, failed) of a pytest JUnit XML report; (0, 1) when nothing ran (an import or collection
    error, or the time limit), so a file that does not even load never counts as passing."""
    passed = failed = 0
    if junit.exists():
        for case in ET.parse(junit).getroot().iter("testcase"):
            if any(c.tag in ("failure", "error") for c in case):
                failed += 1
            elif not any(c.tag == "skipped" for c in case):
                passed += 1
    return (passed, failed) if passed + failed else (0, 1)


def run_differential(lab: Lab, learner: Path, timeout: float = DIFF_TIMEOUT) -> DiffResult:
    with tempfile.TemporaryDirectory(prefix="minisgl-lab-") as tmp:
        report = Path(tmp) / "differential.json"
        cmd = [sys.executable, "-m", "minisgl.labs.differential", lab.name, str(report)]
        child = run_child(cmd, lab_env(lab, learner), timeout)
        if child.code is None:
            return DiffResult(False, f"stopped after {timeout:.0f} s: your code did not finish "
                                     "(an endless loop?)")
        if not report.exists():
            tail = "\n".join(child.output.rstrip().splitlines()[-8:])
            return DiffResult(False, f"the check could not run your file (exit status {child.code}):\n{tail}")
        return DiffResult(**json.loads(report.read_text()))


@dataclass
class Grade:
    lab: Lab
    tests: TestResult
    trace: TraceResult | None  # None: not run (the tests were asked for alone)
    differential: DiffResult | None = None  # None: the lab has no differential check

    def parts(self) -> dict[str, float]:
        """Each part's score."""
        pts = points(self.lab)
        t = self.tests
        out = {"tests": round(pts["tests"] * t.passed / t.total, 2) if t.total else 0.0}
        if "differential" in pts:
            ok = self.differential is not None and self.differential.ok
            out["differential"] = float(pts["differential"]) if ok else 0.0
        if self.trace is not None:
            out["trace"] = float(pts["trace"]) if self.trace.ok else 0.0
        return out

    @property
    def score(self) -> float:
        return round(sum(self.parts().values()), 2)

    def divergence(self) -> str:
        """What the first failing check saw, for hints: the call or event and its fields ('' if none did)."""
        if self.differential is not None and not self.differential.ok:
            d = self.differential
            return " ".join((d.what or d.summary, d.expected, d.got))  # the call, not the set-up before it
        if self.trace is not None and not self.trace.ok:
            return self.trace.what or self.trace.summary
        return " ".join(self.tests.failing())

    def results_json_tests(self) -> list[dict]:
        """Gradescope's results.json `tests` entries for this lab."""
        pts, parts = points(self.lab), self.parts()
        out = [{"name": f"{self.lab.name}: unit tests", "score": parts["tests"], "max_score": pts["tests"],
                "output": f"{self.tests.passed} of {self.tests.total} passed\n" + self.tests.output[-4000:]}]
        if "differential" in pts:
            d = self.differential
            out.append({"name": f"{self.lab.name}: differential check", "score": parts["differential"],
                        "max_score": pts["differential"],
                        "output": "\n".join(x for x in (d.summary, d.report()) if x)[-4000:] if d else ""})
        if self.trace is not None:
            out.append({"name": f"{self.lab.name}: traces of {', '.join(self.lab.scenarios)}",
                        "score": parts["trace"], "max_score": pts["trace"],
                        "output": "\n".join(x for x in (self.trace.summary, self.trace.report) if x)[-4000:]})
        return out


def grade(lab: Lab, learner: Path, out_dir: Path, reference_dir: Path | None = None) -> Grade:
    diff = run_differential(lab, learner) if lab_module(lab.name) is not None else None
    return Grade(lab, run_tests(lab, learner), run_trace(lab, learner, out_dir, reference_dir), diff)
