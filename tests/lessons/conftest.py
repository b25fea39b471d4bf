"""The lesson site, built once per test session from the session's scenario runs.

The scenarios the suite already runs (tests/conftest.py `scenario_runs`) are copied into a course trace
cache keyed by the engine's source hash, so `mkdocs build --strict` fills every page in without running
the engine again. The cache and the site are made once per test run, whichever worker asks first.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import made_once

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def course_cache(request, tmp_path_factory) -> Path:
    """MINISGL_COURSE_CACHE when set (a writer's warm cache: `make lessons` filled it), else the run's own
    scenario runs (made once, on whichever worker asks first)."""
    if os.environ.get("MINISGL_COURSE_CACHE"):
        return Path(os.environ["MINISGL_COURSE_CACHE"])
    scenario_runs = request.getfixturevalue("scenario_runs")
    engine = request.getfixturevalue("base_engine")
    root, _ = made_once(tmp_path_factory, "course-cache", lambda root: _fill(root, scenario_runs, engine))
    return root


def _fill(root: Path, scenario_runs, engine) -> None:
    from course.traces import UNAVAILABLE, engine_hash
    from minisgl.scenarios import NAMES

    folder = root / engine_hash()
    # last scenario first: a worker running tests/scenarios at the same time makes them first to last, so
    # the two meet in the middle instead of one waiting on every run the other makes
    for name in reversed(NAMES):
        try:
            ran = scenario_runs(name)
        except pytest.skip.Exception as e:  # pd_disaggregation without the router: its pages say so
            (folder / name).mkdir(parents=True)
            (folder / name / UNAVAILABLE).write_text(f"{e.msg}\n")
            continue
        shutil.copytree(ran.folder, folder / name)
        (folder / name / "DONE").write_text("from the test session's scenario runs\n")
    _run_whatifs(root, engine)


def _run_whatifs(root: Path, engine) -> None:
    """The lessons' changed runs ({{ whatif }}): run here on the session's shared weights, so the build
    finds every trace it needs in the cache."""
    from course.build import Course
    from course.traces import CourseTraces

    traces = CourseTraces(root=root, say=lambda msg: None, engine=engine)
    course = Course(traces)
    keys = [key for src, text in course.sources(REPO / "lessons" / "docs").items()
            for key in course.scenarios(src, text) if key in traces.changes]
    traces.ensure(keys)


def unavailable(course_cache: Path, name: str) -> str | None:
    """Why the course cache has no trace of `name` (its pages were built as a notice), or None."""
    from course.traces import UNAVAILABLE, engine_hash

    marker = course_cache / engine_hash() / name / UNAVAILABLE
    return marker.read_text(encoding="utf-8").strip() if marker.exists() else None


@pytest.fixture(scope="session")
def built_site(course_cache, tmp_path_factory) -> Path:
    pytest.importorskip("mkdocs", reason="the docs extra is not installed (make test installs it)")
    site, _ = made_once(tmp_path_factory, "site", lambda site: _build(site, course_cache))
    return site


def _build(site: Path, course_cache: Path) -> None:
    env = {**os.environ, "MINISGL_COURSE_CACHE": str(course_cache), "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(site)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout}\n{done.stderr}"
    if not os.environ.get("MINISGL_COURSE_CACHE"):
        assert "running" not in done.stderr, ("the build ran a scenario the session had already run:\n"
                                              + done.stderr)
