"""Grade a learner's file: the lab's unit tests, then the lab's scenario run on the real engine with the
file swapped in, its trace compared with the reference trace. Both run in child processes with a time
limit, so a crash or an endless loop in the learner's code is reported, never inherited."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from minisgl.labs.lab import Lab
from minisgl.labs.swap import ENV

TEST_POINTS, TRACE_POINTS = 50, 50
TEST_TIMEOUT, TRACE_TIMEOUT = 180, 600  # seconds; a 2-core machine loading the model is slow


@dataclass
class Child:
    code: int | None  # None: killed at the time limit
    output: str


def run_child(cmd: list[str], env: dict[str, str], timeout: float) -> Child:
    """Run cmd in its own process group; at the time limit kill the whole group (a server's children too)."""
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
        return Child(proc.returncode, out)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return Child(None, out)


def lab_env(lab: Lab, learner: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != ENV}
    if learner is not None:
        env[ENV] = f"{lab.component}={learner}"
    return env


@dataclass
class TestResult:
    passed: int = 0
    failed: int = 0
    output: str = ""
    timed_out: bool = False

    @property
    def total(self) -> int:
        return self.passed + self.failed

    @property
    def score(self) -> float:
        return round(TEST_POINTS * self.passed / self.total, 2) if self.total else 0.0


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


@dataclass
class TraceResult:
    ok: bool
    summary: str
    report: str = ""
    svg: Path | None = None
    output: str = ""
    details: dict = field(default_factory=dict)

    @property
    def score(self) -> float:
        return float(TRACE_POINTS) if self.ok else 0.0


def reference_trace(lab: Lab, reference_dir: Path | None):
    from tracer.reader import load_trace

    if reference_dir is not None:
        return load_trace(reference_dir)
    from course.traces import CourseTraces  # the course's own cache of scenario traces, by engine hash

    traces = CourseTraces()
    try:
        return traces[lab.scenario]
    finally:
        traces.close()


def run_trace(lab: Lab, learner: Path, out_dir: Path, reference_dir: Path | None = None,
              timeout: float = TRACE_TIMEOUT) -> TraceResult:
    import shutil

    from minisgl.labs.trace_diff import first_divergence
    from tracer.reader import TraceError, load_trace

    out_dir.mkdir(parents=True, exist_ok=True)
    trace_dir, report = out_dir / "trace", out_dir / "run.json"
    shutil.rmtree(trace_dir, ignore_errors=True)
    report.unlink(missing_ok=True)  # a report left by an earlier run must never speak for this one
    cmd = [sys.executable, "-m", "minisgl.labs.runner", lab.scenario, str(trace_dir), str(report)]
    child = run_child(cmd, lab_env(lab, learner), timeout)
    if child.code is None:
        return TraceResult(False, f"stopped after {timeout:.0f} s: your code did not finish (an endless loop?)",
                           output=child.output)
    if report.exists():
        info = json.loads(report.read_text())
    else:  # killed by a signal (a crash in native code, e.g. rows that disagree with their slots)
        info = {"ok": False, "kind": "crash", "round": None,
                "message": f"the engine process died (exit status {child.code}) without a Python error"}
    if info.get("kind") == "swap":
        return TraceResult(False, f"the engine cannot use your file: {info['message']}", output=child.output)
    expected = reference_trace(lab, reference_dir)
    try:
        got = load_trace(trace_dir)
    except TraceError as e:
        got = None
        if info.get("ok"):
            return TraceResult(False, f"the run wrote no readable trace: {e}", output=child.output)
    div = first_divergence(expected, got) if got is not None else None
    if not info.get("ok"):
        where = f"in round {info['round']}" if info.get("round") is not None else "before the first round"
        crash = TraceResult(False, f"your code raised {where}: {info['message']}",
                            report=info.get("traceback", ""), output=child.output, details=info)
        if div is not None and div.got is not None:  # the partial trace had already left the reference
            crash.report = div.report() + "\n\n" + crash.report
            crash.svg = _svg(expected, got, div, out_dir)
        return crash
    if div is None:
        return TraceResult(True, f"your trace equals the reference trace ({len(got.events)} events)")
    return TraceResult(False, f"your trace leaves the reference at event #{div.index} ({div.event})",
                       report=div.report(), svg=_svg(expected, got, div, out_dir), output=child.output)


def _svg(expected, got, div, out_dir: Path) -> Path | None:
    from minisgl.labs.side_by_side import write_side_by_side

    fields = f" ({', '.join(div.fields)})" if div.fields else ""
    if div.round is not None:
        return write_side_by_side(expected, got, div.event, div.round,
                                  f"first divergence: round {div.round}, {div.event}{fields}",
                                  out_dir / f"divergence-round-{div.round}.svg")
    if div.rid is not None:  # an HTTP or TokenizerManager event: the request's lifecycle, expected beside got
        return write_side_by_side(expected, got, div.event, None,
                                  f"first divergence: request {div.rid}, {div.event}{fields}",
                                  out_dir / f"divergence-{div.rid}.svg", rid=div.rid)
    return None


@dataclass
class Grade:
    lab: Lab
    tests: TestResult
    trace: TraceResult | None  # None: not run (the tests were asked for alone)

    @property
    def score(self) -> float:
        return self.tests.score + (self.trace.score if self.trace else 0.0)

    def results_json_tests(self) -> list[dict]:
        """Gradescope's results.json `tests` entries for this lab."""
        out = [{"name": f"{self.lab.name}: unit tests", "score": self.tests.score, "max_score": TEST_POINTS,
                "output": f"{self.tests.passed} of {self.tests.total} passed\n" + self.tests.output[-4000:]}]
        if self.trace is not None:
            out.append({"name": f"{self.lab.name}: trace of scenario {self.lab.scenario}",
                        "score": self.trace.score, "max_score": TRACE_POINTS,
                        "output": "\n".join(x for x in (self.trace.summary, self.trace.report) if x)[-4000:]})
        return out


def grade(lab: Lab, learner: Path, out_dir: Path, reference_dir: Path | None = None) -> Grade:
    return Grade(lab, run_tests(lab, learner), run_trace(lab, learner, out_dir, reference_dir))
