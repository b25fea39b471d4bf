"""One trace per scenario, run on the real engine once per engine version and kept on disk.

The cache folder is named by a hash of the engine's source (minisgl/ and tracer/, .py and C++ files) and
of the model file, so any change to the engine runs the scenarios again, and an unchanged engine rebuilds
the course in seconds. `MINISGL_COURSE_CACHE` moves the cache (default ~/.cache/minisgl/course).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

from minisgl.scenarios.pd_server import NoRouter
from tracer.reader import Trace, load_trace

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("minisgl", "tracer")  # what a scenario's trace depends on (with the model file)
SUFFIXES = (".py", ".cpp", ".h")


def cache_root() -> Path:
    env = os.environ.get("MINISGL_COURSE_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "minisgl" / "course"


def engine_hash() -> str:
    """A hash of every engine source file (relative path and bytes) and the model file's identity."""
    from minisgl.model_loader.loader import resolve_model

    h = hashlib.sha256()
    for top in SOURCES:
        for path in sorted((ROOT / top).rglob("*")):
            if path.suffix in SUFFIXES and "__pycache__" not in path.parts and not _is_lab_file(path):
                h.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    model = resolve_model(None).path
    st = model.stat()
    h.update(f"{model.name}:{st.st_size}".encode())
    return h.hexdigest()[:16]


def _is_lab_file(path: Path) -> bool:
    """The labs' starters, tests and references never run in a scenario: editing them keeps the cache."""
    return "catalog" in path.parts and "labs" in path.parts


class ScenarioUnavailable(LookupError):
    """A scenario that cannot run on this machine (pd_disaggregation without SGLang's router): the pages
    that need it are built as a notice that says what is missing, the rest of the course as usual."""


UNAVAILABLE = "UNAVAILABLE"  # a cache entry's file saying why its scenario could not run (no trace)


def _say(msg: str) -> None:
    print(f"course: {msg}", file=sys.stderr, flush=True)


class CourseTraces:
    """traces[name] -> the scenario's Trace, run (and cached) the first time it is asked for."""

    def __init__(self, root: Path | None = None, say: Callable[[str], None] = _say, engine=None) -> None:
        """engine: a loaded Engine whose weights the engine scenarios share (a test session's); else one is
        loaded when the first of them runs, and shut down by close()."""
        self.folder = (root or cache_root()) / engine_hash()
        self.say = say
        self._traces: dict[str, Trace] = {}
        self._engine, self._own_engine = engine, engine is None
        self.unavailable: dict[str, str] = {}  # scenario -> what it lacks, found in this build
        self.changes: dict[str, tuple[str, dict, dict]] = {}  # "name@digest" -> a changed run (whatif)

    def changed(self, name: str, sets: dict, prompts: dict) -> str:
        """The cache key of `name` run with changes (`minisgl scenario run NAME --set ...`), registered so
        that ensure() and traces[key] can run it."""
        spec = json.dumps([sets, prompts], sort_keys=True)
        key = f"{name}@{hashlib.sha256(spec.encode()).hexdigest()[:10]}"
        self.changes[key] = (name, sets, prompts)
        return key

    def path(self, name: str) -> Path:
        return self.folder / name

    def reason_unavailable(self, name: str) -> str | None:
        """Why `name` cannot run here (a test session records it in the cache), or None."""
        marker = self.path(name) / UNAVAILABLE
        if name not in self.unavailable and marker.exists():
            self.unavailable[name] = marker.read_text(encoding="utf-8").strip()
        return self.unavailable.get(name)

    def __getitem__(self, name: str) -> Trace:
        if (why := self.reason_unavailable(name)) is not None:
            raise ScenarioUnavailable(f"scenario {name} could not run on this machine: {why}")
        if name not in self._traces:
            if not (self.path(name) / "DONE").exists():
                try:
                    self._run(name)
                except NoRouter as e:
                    self.unavailable[name] = str(e)
                    raise ScenarioUnavailable(f"scenario {name} could not run on this machine: {e}") from None
            self._traces[name] = load_trace(self.path(name))
        return self._traces[name]

    def ensure(self, names: list[str]) -> None:
        """Run every missing scenario of `names` (one model load shared by the offline ones), with
        progress."""
        missing = [n for n in dict.fromkeys(names)
                   if not (self.path(n) / "DONE").exists() and self.reason_unavailable(n) is None]
        if missing:
            self.say(f"running {len(missing)} scenario(s) for engine {self.folder.name} "
                     f"(cached in {self.folder.parent}; later builds reuse them)")
        try:
            for i, name in enumerate(missing, 1):
                self.say(f"[{i}/{len(missing)}] {name}")
                try:
                    self._run(name)
                except NoRouter as e:  # the one optional part a scenario needs: its pages say so
                    self.unavailable[name] = str(e)
                    self.say(f"{name} cannot run here, its pages will say so: {e}")
        finally:
            self.close()

    def _run(self, name: str) -> None:
        from minisgl.scenarios import get
        from minisgl.scenarios.driver import run

        if name in self.changes:
            from minisgl.scenarios.changes import change

            base, sets, prompts = self.changes[name]
            sc = change(get(base), sets, prompts)
        else:
            sc = get(name)
        self.folder.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=self.folder))
        start = time.monotonic()
        try:
            loaded = self._loaded() if sc.server is None else None
            run(sc, str(tmp / "trace"), loaded=loaded)
            (tmp / "trace" / "DONE").write_text(f"{time.monotonic() - start:.1f} s\n")
            try:
                os.replace(tmp / "trace", self.path(name))  # atomic: a reader never sees half a trace
            except OSError:
                if not (self.path(name) / "DONE").exists():
                    raise  # not another build's finished copy of the same run
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def _loaded(self):
        if self._engine is None:
            from minisgl.entrypoints.engine import Engine

            self._engine = Engine(dtype="float32", max_total_tokens=4096, max_running_requests=32)
        return self._engine

    def close(self) -> None:
        if self._engine is not None and self._own_engine:
            self._engine.shutdown()
            self._engine = None
