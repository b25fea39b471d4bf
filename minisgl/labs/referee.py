"""One lab's grade, made cheap enough to run on hundreds of files: the checks of `minisgl lab grade` (the
differential check, the traces of the lab's scenarios, the unit tests), run in one process that loads the
model once. The bug catalogs (bugs.py) and the mutation runs (mutants.py) measure a grader's strength
with it: which of its parts catch a given wrong file.

Offline scenarios run on forks of one loaded Engine with the file swapped in (as the course's reference
traces are run); a scenario about HTTP starts its own server in a child process (trace_grade.run_trace).
A file that loops is stopped by an alarm after `timeout` seconds and counts as caught."""

from __future__ import annotations

import shutil
import signal
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from minisgl.labs import swap
from minisgl.labs.components import get as get_component
from minisgl.labs.differential import check_file, lab_module
from minisgl.labs.lab import Lab


class Stopped(BaseException):
    """A BaseException, so neither Hypothesis nor the engine takes it for the file's own error and retries."""


@contextmanager
def alarm(seconds: float):
    def ring(signum, frame):
        raise Stopped(f"stopped after {seconds:g} s")

    old = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@dataclass
class Verdict:
    """What each part of the grade says of one file: None where a part was not run."""

    differential: str | None = None  # "" passed, else why it failed
    trace: str | None = None
    tests: str | None = None

    def caught_by(self) -> str:
        """The first part that failed the file ('differential', 'trace', 'tests'), or '' when none did."""
        for part in ("differential", "trace", "tests"):
            if getattr(self, part):
                return part
        return ""


class Referee:
    def __init__(self, lab: Lab, timeout: float = 60.0, engine=None) -> None:
        """`engine`: a loaded Engine to fork (a test session's), kept open by close(); else one is loaded."""
        self.lab, self.timeout = lab, timeout
        self.component = get_component(lab.component)
        self.has_differential = lab_module(lab.name) is not None
        self._engine, self._own_engine = engine, engine is None
        self._expected: dict[str, list] = {}
        self._seconds: dict[str, float] = {}  # each reference run's time
        self._tmp = Path(tempfile.mkdtemp(prefix="minisgl-referee-"))

    def close(self) -> None:
        if self._engine is not None and self._own_engine:
            self._engine.shutdown()
        self._engine = None
        shutil.rmtree(self._tmp, ignore_errors=True)

    # ---- the parts ---------------------------------------------------------------------------------
    def differential(self, path: Path, max_examples: int | None = None) -> str | None:
        """'' when the file agrees with the engine's component, else why not; None for a lab with no check."""
        if not self.has_differential:
            return None
        kw = {} if max_examples is None else {"max_examples": max_examples}
        try:
            with alarm(self.timeout):
                result = check_file(self.lab.name, self.lab.component, path, **kw)
        except (Stopped, swap.LabSwapError) as e:
            return str(e)
        return "" if result.ok else result.summary

    def trace(self, path: Path) -> str:
        """'' when every scenario's trace equals the reference's, else the first difference."""
        from minisgl.labs.trace_diff import first_divergence

        for name in self.lab.scenarios:
            expected = self.expected(name)  # first: its run time sets the learner's run's limit
            try:
                got = self._run(name, path)
            except swap.LabSwapError as e:
                return str(e)
            except (Exception, Stopped) as e:  # the file raised inside the engine, or looped
                return f"{name}: raised {type(e).__name__}: {e}"
            div = first_divergence(expected, got)
            if div is not None:
                return f"{name}: event #{div.index} {div.event} {' '.join(div.fields)}".strip()
        return ""

    def tests(self, path: Path) -> str:
        from minisgl.labs.grade import run_tests

        result = run_tests(self.lab, path, timeout=self.timeout * 3)
        return "" if result.failed == 0 else f"{result.failed} of {result.total} unit tests failed"

    def judge(self, path: Path, parts: tuple[str, ...] = ("differential", "trace", "tests"),
              stop_at_first: bool = True) -> Verdict:
        """Run the parts in order; with stop_at_first, the parts after the first that fails are not run."""
        v = Verdict()
        for part in parts:
            setattr(v, part, getattr(self, part)(path))
            if stop_at_first and getattr(v, part):
                break
        return v

    # ---- scenario runs -----------------------------------------------------------------------------
    def expected(self, name: str):
        """The reference trace of one scenario, run here with the engine's own component (once)."""
        if name not in self._expected:
            import time

            start = time.monotonic()
            self._expected[name] = self._run(name, None)
            self._seconds[name] = time.monotonic() - start
        return self._expected[name]

    def limit(self, name: str) -> float:
        """A run's time limit: `timeout`, or ten times the reference's own run where that is longer (a loaded
        machine must not make a slow but correct file look like an endless loop)."""
        return max(self.timeout, 10 * self._seconds.get(name, 0.0))

    def _run(self, name: str, path: Path | None):
        from minisgl.scenarios import get
        from minisgl.scenarios.driver import run
        from tracer.reader import load_trace

        sc = get(name)
        out = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=self._tmp))
        if sc.server is not None:  # the server's processes take the file through MINISGL_LAB
            return self._run_served(name, path, out)
        if self._engine is None:
            from minisgl.entrypoints.engine import Engine

            self._engine = Engine(dtype="float32", max_total_tokens=4096, max_running_requests=32)
        try:
            if path is not None:
                swap.install(self.component, path, quiet=True)
            with alarm(self.limit(name) if path is not None else 3600):
                run(sc, str(out / "trace"), loaded=self._engine)
            return load_trace(out / "trace")
        finally:
            swap.restore()

    def _run_served(self, name: str, path: Path | None, out: Path):
        import json
        import sys

        from minisgl.labs.proc import lab_env, run_child
        from tracer.reader import load_trace

        learner = path if path is not None else self.lab.reference
        cmd = [sys.executable, "-m", "minisgl.labs.runner", str(out / "trace"), str(out / "run.json"), name]
        child = run_child(cmd, lab_env(self.lab, learner), self.timeout * 3)
        if child.code is None:
            raise Stopped(f"stopped after {self.timeout * 3:g} s")
        report = out / "run.json"
        info = json.loads(report.read_text()) if report.exists() else {"ok": False, "message": "no report"}
        if not info["ok"]:
            raise RuntimeError(info.get("message", "the run failed"))
        return load_trace(out / "trace" / name)
