"""Golden files: each view of each fixture trace, as DOT and (lifecycle, radix) Mermaid, compared
byte for byte with tests/diagrams/golden/. The lessons embed these pictures, so a change must be seen.

After an intended change, regenerate them and review the diff:

    MINISGL_UPDATE_GOLDEN=1 .venv/bin/python -m pytest -q tests/diagrams/test_golden.py
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.diagrams.helpers import FIXTURES, HERE
from tracer.diagrams import SUFFIX, render_diagram
from tracer.reader import load_trace

GOLDEN = HERE / "golden"
UPDATE = os.environ.get("MINISGL_UPDATE_GOLDEN") == "1"

# name -> (fixture, view, format, options)
CASES = {
    "engine-lifecycle-req-a": ("engine_two_requests", "lifecycle", "dot", {"rid": "req-a"}),
    "engine-lifecycle-req-a-mermaid": ("engine_two_requests", "lifecycle", "mermaid", {"rid": "req-a"}),
    "engine-lifecycle-req-b": ("engine_two_requests", "lifecycle", "dot", {"rid": "req-b"}),
    "engine-round-req-b": ("engine_two_requests", "round", "dot", {"rid": "req-b"}),
    "engine-kv-round4": ("engine_two_requests", "kv", "dot", {"round": 4}),
    "engine-radix-req-a-round5": ("engine_two_requests", "radix", "dot", {"rid": "req-a", "round": 5}),
    "engine-radix-all-rounds": ("engine_two_requests", "radix", "mermaid", {"all_rounds": True}),
    "server-lifecycle": ("server_one_request", "lifecycle", "dot", {}),
    "server-lifecycle-mermaid": ("server_one_request", "lifecycle", "mermaid", {}),
    "server-round": ("server_one_request", "round", "dot", {"rid": "s1"}),
    "server-kv": ("server_one_request", "kv", "dot", {}),
    "server-radix": ("server_one_request", "radix", "dot", {"rid": "s1"}),
    "chat-lifecycle": ("server_chat", "lifecycle", "dot", {}),
    "chat-lifecycle-mermaid": ("server_chat", "lifecycle", "mermaid", {}),
    "chat-lifecycle-all-rounds": ("server_chat", "lifecycle", "dot", {"all_rounds": True}),
    "chat-round2": ("server_chat", "round", "dot", {"round": 2}),
    "chat-kv": ("server_chat", "kv", "dot", {}),
    "chat-radix": ("server_chat", "radix", "dot", {}),
    "chat-radix-mermaid": ("server_chat", "radix", "mermaid", {}),
}


def golden_path(name: str) -> Path:
    return GOLDEN / f"{name}{SUFFIX[CASES[name][2]]}"


def render(folder: Path, view: str, fmt: str, options: dict) -> str:
    out = render_diagram(load_trace(folder), view, fmt, **options)
    assert isinstance(out, str)
    return out


@pytest.mark.parametrize("name", list(CASES))
def test_matches_golden(name):
    fixture, view, fmt, options = CASES[name]
    text = render(FIXTURES[fixture], view, fmt, options)
    path = golden_path(name)
    if UPDATE:
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"no golden file {path.name}: run with MINISGL_UPDATE_GOLDEN=1 and review it"
    assert text == path.read_text(encoding="utf-8"), (
        f"{path.name} changed; if intended, regenerate with MINISGL_UPDATE_GOLDEN=1 and review the diff")


def test_no_stale_golden_files():
    known = {golden_path(name).name for name in CASES}
    assert {p.name for p in GOLDEN.iterdir()} == known


def _retimed(src: Path, dst: Path, shift_ns: int, pid_shift: int) -> Path:
    """A copy of the trace recorded at another time by other processes: every clock shifted, every pid
    changed (files renamed to match). Nothing a diagram shows may change."""
    dst.mkdir()
    for path in sorted(src.glob("*.jsonl")):
        records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        pid = records[0]["pid"] + pid_shift
        for r in records:
            r["pid"], r["ts"] = pid, r["ts"] + shift_ns
            if r["name"] == "trace.process_start":
                r["attrs"]["mono_ns"] += shift_ns
                r["attrs"]["wall_ns"] += 3 * shift_ns
            if r["name"] == "model.forward" and "duration_ms" in r.get("attrs", {}):
                r["attrs"]["duration_ms"] += 1.25
        proc = path.name.rsplit("-", 1)[0]
        (dst / f"{proc}-{pid}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return dst


@pytest.mark.parametrize("fixture", ["server_one_request", "server_chat"])
def test_times_and_pids_do_not_reach_the_diagrams(fixture, tmp_path):
    copy = _retimed(FIXTURES[fixture], tmp_path / fixture, shift_ns=123_456_789_000, pid_shift=1111)
    for name, (fx, view, fmt, options) in CASES.items():
        if fx == fixture:
            assert render(copy, view, fmt, options) == golden_path(name).read_text(encoding="utf-8"), name


def test_the_docs_example_is_real_output():
    """lessons/docs/reference/diagrams.md shows the start of a golden file: it must not drift from it."""
    page = (HERE.parents[1] / "lessons" / "docs" / "reference" / "diagrams.md").read_text(encoding="utf-8")
    example = page.split("```mermaid\n", 1)[1].split("```", 1)[0].splitlines()
    golden = golden_path("server-lifecycle-mermaid").read_text(encoding="utf-8").splitlines()
    assert len(example) >= 10 and example == golden[: len(example)]
