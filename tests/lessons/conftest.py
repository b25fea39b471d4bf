"""The lesson site, built once per test session from the session's scenario runs.

The scenarios the suite already runs (tests/conftest.py `scenario_runs`) are copied into a course trace
cache keyed by the engine's source hash, so `mkdocs build --strict` fills every page in without running
the engine again.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def course_cache(request, tmp_path_factory) -> Path:
    """MINISGL_COURSE_CACHE when set (a writer's warm cache: `make lessons` filled it), else the session's
    own scenario runs."""
    from course.traces import engine_hash
    from minisgl.scenarios import NAMES

    if os.environ.get("MINISGL_COURSE_CACHE"):
        return Path(os.environ["MINISGL_COURSE_CACHE"])
    scenario_runs = request.getfixturevalue("scenario_runs")
    root = tmp_path_factory.mktemp("course-cache")
    folder = root / engine_hash()
    for name in NAMES:
        shutil.copytree(scenario_runs(name).folder, folder / name)
        (folder / name / "DONE").write_text("from the test session's scenario runs\n")
    return root


@pytest.fixture(scope="session")
def built_site(course_cache, tmp_path_factory) -> Path:
    pytest.importorskip("mkdocs", reason="the docs extra is not installed (make test installs it)")
    site = tmp_path_factory.mktemp("site")
    env = {**os.environ, "MINISGL_COURSE_CACHE": str(course_cache), "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(site)],
                          cwd=REPO / "lessons", env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout}\n{done.stderr}"
    if not os.environ.get("MINISGL_COURSE_CACHE"):
        assert "running" not in done.stderr, "the build ran a scenario the session had already run:\n" + done.stderr
    return site
