"""`minisgl lab` as a learner and a teacher use it: start a lab, break one line of a correct implementation,
grade, and read the first divergent event and the SVG of that round; the reference scores full marks; the
workspace commands; results.json in Gradescope's shape."""

from __future__ import annotations

import json
import time
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def lab(*args: str, cwd: Path, input: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "minisgl.cli", "lab", "--dir", str(cwd / "ws"), *args],
                          capture_output=True, text=True, cwd=cwd, input=input, timeout=900)


def test_the_workspace_commands(tmp_path):
    assert "radix_cache" in lab("list", cwd=tmp_path).stdout
    started = lab("start", "radix_cache", cwd=tmp_path)
    assert started.returncode == 0, started.stderr
    mine = tmp_path / "ws" / "radix_cache" / "radix_cache.py"
    assert mine.read_text() == (REPO / "minisgl/labs/catalog/radix_cache/starter.py").read_text()
    assert (tmp_path / "ws" / "radix_cache" / "README.md").exists()
    again = lab("start", "radix_cache", cwd=tmp_path)
    assert again.returncode == 2 and "exists already" in again.stderr
    assert "hint 1 of" in lab("hint", "radix_cache", cwd=tmp_path).stdout
    renamed = lab("hint", "radix_tree", cwd=tmp_path)  # the lab's earlier name still finds it, and says so
    assert "hint 2 of" in renamed.stdout and "lab radix_tree is now called radix_cache" in renamed.stderr
    mine.write_text(mine.read_text() + "\n# my change\n")
    status = lab("status", cwd=tmp_path).stdout
    assert "radix_cache" in status and "edited" in status and "2/" in status
    kept = lab("reset", "radix_cache", cwd=tmp_path, input="n\n")
    assert kept.returncode == 1 and "# my change" in mine.read_text()
    assert lab("reset", "radix_cache", "--yes", cwd=tmp_path).returncode == 0
    assert "# my change" not in mine.read_text() and "# my change" in (mine.parent / "radix_cache.py.bak").read_text()
    bad = lab("grade", "no_such_lab", cwd=tmp_path)
    assert bad.returncode != 0 and "no lab named 'no_such_lab'" in bad.stderr


@pytest.mark.slow
def test_one_broken_line_shows_the_first_divergent_event_and_the_round_side_by_side(tmp_path, scenario_runs):
    reference = scenario_runs("radix_cache").folder
    assert lab("start", "radix_cache", cwd=tmp_path).returncode == 0
    mine = tmp_path / "ws" / "radix_cache" / "radix_cache.py"
    correct = (REPO / "minisgl/mem_cache/radix_cache.py").read_text()
    broken = correct.replace("        heapq.heapify(leaves)\n", "        leaves.sort(reverse=True)\n")
    assert broken != correct
    mine.write_text(broken)
    out = lab("grade", "radix_cache", "--reference-trace", reference, "--json", str(tmp_path / "results.json"),
              cwd=tmp_path)
    assert out.returncode == 1, out.stdout + out.stderr
    text = out.stdout
    verdict = text.split("score: ")[1].splitlines()  # the verdict comes first, one line per part
    assert verdict[0] == "35/100"  # 7 of 8 unit tests: 35 of 40; the differential check and the trace: 0
    assert "7 of 8 passed" in verdict[1] and verdict[1].lstrip().startswith("unit tests")
    assert verdict[2].lstrip().startswith("differential") and "FAIL" in verdict[2]
    assert verdict[3].lstrip().startswith("trace") and "FAIL" in verdict[3]
    # the differential check's shortest example, the engine's answers as comments, then the trace's event
    assert "the shortest sequence that shows it" in text and "# engine:" in text and "<- yours:" in text
    assert "first divergence: event #" in text and "kv.free" in text
    assert text.index("score: ") < text.index("unit tests' output: ") < text.index("next: `minisgl lab hint")
    hint = lab("hint", "radix_cache", cwd=tmp_path).stdout
    assert "fits what your last grade saw diverge" in hint and "evict" in hint
    svg = Path(text.split("drawn expected | got: ")[1].split()[0])
    root = ET.parse(svg).getroot()
    titles = [t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert any(t.startswith("expected") for t in titles) and any(t.startswith("got") for t in titles)
    assert 'fill="#d00000"' in svg.read_text()  # the differing labels are marked
    results = json.loads((tmp_path / "results.json").read_text())
    assert set(results) == {"score", "tests"} and len(results["tests"]) == 3
    assert all({"name", "score", "max_score", "output"} <= set(t) for t in results["tests"])
    assert results["score"] == sum(t["score"] for t in results["tests"]) < 100
    # (that the reference scores full marks, part by part, is tests/labs/test_catalog.py's and test_bugs.py's)


@pytest.mark.slow
def test_a_crash_and_an_endless_loop_are_reported_not_inherited(tmp_path, scenario_runs):
    import psutil

    from minisgl.labs.catalog import get
    from minisgl.labs.trace_grade import run_trace

    radix = get("radix_cache")
    correct = (REPO / "minisgl/mem_cache/radix_cache.py").read_text()
    crash = tmp_path / "crash.py"
    crash.write_text(correct.replace("    def evict(self, num_tokens: int) -> list[torch.Tensor]:\n",
                                     "    def evict(self, num_tokens: int) -> list[torch.Tensor]:\n"
                                     "        raise KeyError('oops')\n"))
    result = run_trace(radix, crash, tmp_path / "g1", reference_dir=scenario_runs("radix_cache").folder)
    assert not result.ok and "your code raised in round" in result.summary and "KeyError" in result.summary
    assert "def evict" in result.report or "evict" in result.report  # the traceback names the learner's frame
    loop = tmp_path / "loop.py"
    loop.write_text(correct.replace("    def match_prefix(self, key: list[int]) -> MatchResult:\n",
                                    "    def match_prefix(self, key: list[int]) -> MatchResult:\n"
                                    "        while True:\n            pass\n"))
    result = run_trace(radix, loop, tmp_path / "g2", timeout=12)  # stopped in the loop, or still loading
    assert not result.ok and "did not finish" in result.summary

    def ours(p) -> bool:  # this run's processes name its own folder on their command line
        try:
            return str(tmp_path / "g2") in " ".join(p.cmdline())
        except psutil.Error:
            return False

    assert not [p for p in psutil.process_iter() if ours(p)]


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_a_stopped_grade_leaves_no_process_behind(tmp_path, sig):
    """A grade's children run in sessions of their own (a crash or a loop in the learner's code must not take
    the grade down), so neither Ctrl+C nor SIGTERM reaches them; the grade takes them down as it stops."""
    import signal

    import psutil

    assert lab("start", "spec_verify", cwd=tmp_path).returncode == 0
    mine = tmp_path / "ws" / "spec_verify" / "spec_verify.py"  # a loop: its child runs until stopped
    mine.write_text(mine.read_text().replace('raise NotImplementedError("TODO: accept_lengths")',
                                             "while True:\n        pass"))
    cmd = [sys.executable, "-m", "minisgl.cli", "lab", "--dir", str(tmp_path / "ws"), "grade", "spec_verify"]
    # SIGINT as a terminal delivers it: a suite started in the background (`make test &`) hands its children
    # SIGINT ignored, and Python then leaves it ignored
    proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    grade = psutil.Process(proc.pid)
    children: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + 300
        while not grade.children(recursive=True):  # its first child (the unit tests, looping) has started
            assert proc.poll() is None and time.monotonic() < deadline, proc.stdout.read()
            time.sleep(0.05)
        children = grade.children(recursive=True)
        proc.send_signal(getattr(signal, sig))
        try:
            out, _ = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            pytest.fail(f"the grade did not stop on {sig}; children then {children}; its output:\n"
                        + proc.communicate()[0])
    finally:
        if proc.poll() is None:
            proc.kill()
        _, alive = psutil.wait_procs(children, timeout=30)
        for child in alive:  # whatever happened above, this test leaves no looping child behind
            child.kill()
    assert proc.returncode != 0, out
    assert not alive, f"left running after {sig}: {alive}"
