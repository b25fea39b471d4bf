"""Running a lab's own unit tests from inside this test session, with a given file swapped in."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest


def run_lab_tests(lab, learner: Path, tmp_path: Path) -> tuple[int, int]:
    """(passed, failed) of the lab's test_lab.py with MINISGL_LAB pointing at `learner`, run in this process
    (a nested pytest run, as pytest's own pytester does), the engine's components put back afterwards."""
    from minisgl.labs import swap

    junit = tmp_path / f"junit-{lab.name}-{learner.stem}.xml"
    before = set(sys.modules)
    old = os.environ.get(swap.ENV)
    os.environ[swap.ENV] = f"{lab.component}={learner}"
    try:
        pytest.main(["-q", "-p", "no:cacheprovider", "-p", "no:textual-snapshot", "-o", "addopts=",
                     f"--junitxml={junit}", "--rootdir",
                     str(lab.folder), str(lab.tests)])
    finally:
        if old is None:
            os.environ.pop(swap.ENV, None)
        else:
            os.environ[swap.ENV] = old
        swap.restore()
        # Only the lab's test module and the learner's file are dropped, to be fresh next time. An engine
        # module the nested run imported first stays: dropped, it would be imported again as a second copy
        # while the modules that already hold the first (a kernel registry, zmq's exception classes) keep
        # theirs.
        for name in set(sys.modules) - before:
            if name.startswith("minisgl_lab_") or name.rsplit(".", 1)[-1] in ("test_lab", "conftest"):
                del sys.modules[name]
    from minisgl.labs.grade import junit_counts

    return junit_counts(junit)
