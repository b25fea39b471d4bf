"""The trace part of a grade: the lab's grading scenarios (the lesson's, then its boundary ones) run on the
real engine with the learner's file swapped in, each trace compared with the reference's event by event;
the first scenario whose trace leaves the reference gives the verdict, its first divergent event and an SVG
of it."""

from __future__ import annotations

import json
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from minisgl.labs.lab import Lab
from minisgl.labs.proc import lab_env, run_child

TRACE_TIMEOUT = 600  # seconds, for all of a lab's scenarios; a 2-core machine loading the model is slow


@dataclass
class TraceResult:
    ok: bool
    summary: str
    report: str = ""
    svg: Path | None = None
    output: str = ""
    details: dict = field(default_factory=dict)
    scenario: str | None = None  # the scenario the verdict is about
    what: str = ""  # the divergent event and fields, for hints


def reference_trace(lab: Lab, name: str, reference_dir: Path | None):
    """The reference trace of one grading scenario: REFERENCE_DIR/<name>, or REFERENCE_DIR itself for the
    lesson's scenario; else the course's own cache of scenario traces (by engine hash)."""
    from tracer.reader import load_trace

    reference_dir = Path(reference_dir) if reference_dir is not None else None
    if reference_dir is not None and (reference_dir / name).is_dir():
        return load_trace(reference_dir / name)
    if reference_dir is not None and name == lab.scenario:
        return load_trace(reference_dir)
    from course.traces import CourseTraces

    traces = CourseTraces()
    try:
        return traces[name]
    finally:
        traces.close()


def run_trace(lab: Lab, learner: Path, out_dir: Path, reference_dir: Path | None = None,
              timeout: float = TRACE_TIMEOUT, scenarios: tuple[str, ...] | None = None) -> TraceResult:
    from minisgl.labs.trace_diff import first_divergence
    from tracer.reader import TraceError, load_trace

    scenarios = scenarios or lab.scenarios
    out_dir.mkdir(parents=True, exist_ok=True)
    trace_root, report = out_dir / "trace", out_dir / "run.json"
    shutil.rmtree(trace_root, ignore_errors=True)
    report.unlink(missing_ok=True)  # a report left by an earlier run must never speak for this one
    cmd = [sys.executable, "-m", "minisgl.labs.runner", str(trace_root), str(report), *scenarios]
    child = run_child(cmd, lab_env(lab, learner), timeout)
    if child.code is None:
        return TraceResult(False, f"stopped after {timeout:.0f} s: your code did not finish "
                                  "(an endless loop?)", output=child.output)
    if report.exists():
        info = json.loads(report.read_text())
    else:  # killed by a signal (a crash in native code, e.g. rows that disagree with their slots)
        info = {"ok": False, "kind": "crash", "round": None, "scenario": None, "ran": [],
                "message": f"the engine process died (exit status {child.code}) without a Python error"}
    if info.get("kind") == "swap":
        return TraceResult(False, f"the engine cannot use your file: {info['message']}", output=child.output)
    for name in scenarios:
        expected = reference_trace(lab, name, reference_dir)
        ran = name in info.get("ran", [])
        try:
            got = load_trace(trace_root / name)
        except TraceError as e:
            got = None
            if ran:
                return TraceResult(False, f"scenario {name}: the run wrote no readable trace: {e}",
                                   output=child.output, scenario=name)
        div = first_divergence(expected, got) if got is not None else None
        if not ran:  # it crashed in this scenario (or the process died)
            where = f"in round {info['round']}" if info.get("round") is not None else "before the first round"
            crash = TraceResult(False, f"scenario {name}: your code raised {where}: {info['message']}",
                                report=info.get("traceback", ""), output=child.output, details=info,
                                scenario=name, what=info["message"])
            if div is not None and div.got is not None:  # the partial trace had already left the reference
                crash.report = div.report() + "\n\n" + crash.report
                crash.svg = _svg(expected, got, div, out_dir, name, lab.view)
                crash.what = _what(div)
            return crash
        if div is not None:
            return TraceResult(False, f"scenario {name}: your trace leaves the reference at event "
                                      f"#{div.index} ({div.event})", report=div.report(),
                               svg=_svg(expected, got, div, out_dir, name, lab.view), output=child.output,
                               scenario=name, what=_what(div))
    n = len(scenarios)
    return TraceResult(True, f"your traces equal the reference traces ({n} scenario{'s' * (n > 1)}: "
                             f"{', '.join(scenarios)})")


def _what(div) -> str:
    return " ".join([div.event, *div.fields])


def _svg(expected, got, div, out_dir: Path, scenario: str, view: str = "") -> Path | None:
    from minisgl.labs.side_by_side import write_side_by_side

    fields = f" ({', '.join(div.fields)})" if div.fields else ""
    if div.round is not None:
        return write_side_by_side(expected, got, div.event, div.round,
                                  f"{scenario}, first divergence: round {div.round}, {div.event}{fields}",
                                  out_dir / f"divergence-{scenario}-round-{div.round}.svg", view=view)
    if div.rid is not None:  # an HTTP or TokenizerManager event: the request's lifecycle, expected beside got
        return write_side_by_side(expected, got, div.event, None,
                                  f"{scenario}, first divergence: request {div.rid}, {div.event}{fields}",
                                  out_dir / f"divergence-{scenario}-{div.rid}.svg", rid=div.rid)
    return None
