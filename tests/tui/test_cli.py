"""`minisgl replay` and `python -m tui`: a folder that cannot be replayed is one line and exit status 2,
found before textual (or torch) is imported."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.tracer.helpers import ENGINE

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = {"minisgl replay": [sys.executable, "-m", "minisgl.cli", "replay"],
            "python -m tui": [sys.executable, "-m", "tui"]}


def _bad(tmp: Path, kind: str) -> list[str]:
    if kind == "missing":
        return [str(tmp / "nope")]
    if kind == "empty":
        (tmp / "empty").mkdir()
        return [str(tmp / "empty")]
    if kind == "a file":
        (tmp / "f.jsonl").write_text("{}\n")
        return [str(tmp / "f.jsonl")]
    if kind == "corrupt":
        (tmp / "c").mkdir()
        (tmp / "c" / "engine-1.jsonl").write_text('{"v":1}\nnot json\n{"v":1}\n')
        return [str(tmp / "c")]
    if kind == "unknown rid":
        return [str(ENGINE), "--rid", "req-zzz"]
    if kind == "bad poll":
        return [str(ENGINE), "--follow", "--poll", "0"]
    raise ValueError(kind)


EXPECTED = {"missing": "does not exist", "empty": "has no *.jsonl files", "a file": "is not a folder",
            "corrupt": "corrupt", "unknown rid": "no request 'req-zzz'", "bad poll": "--poll must be"}


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("kind", list(EXPECTED))
def test_a_bad_folder_is_one_line_and_exit_2(tmp_path, command, kind):
    r = subprocess.run(COMMANDS[command] + _bad(tmp_path, kind), check=False, cwd=ROOT, text=True, capture_output=True,
                       timeout=60, env={**os.environ, "TERM": "dumb"})
    assert r.returncode == 2, r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{command}: error: "), r.stderr
    assert EXPECTED[kind] in lines[0]
    assert r.stdout == ""


def test_fails_before_textual_or_torch_is_imported(tmp_path):
    code = ("import sys; from minisgl.cli import main; "
            f"rc = main(['replay', {str(tmp_path / 'missing')!r}]); "
            "print(rc, 'textual' in sys.modules, 'torch' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], check=False, cwd=ROOT, text=True, capture_output=True, timeout=60)
    assert r.stdout.split() == ["2", "False", "False"], r.stderr


def test_help_names_every_option():
    r = subprocess.run(COMMANDS["minisgl replay"] + ["--help"], check=False, cwd=ROOT, text=True, capture_output=True,
                       timeout=60)
    assert r.returncode == 0
    for word in ("usage: minisgl replay", "dir", "--follow", "--rid", "--poll", "live mode", "--web", "--host",
                 "--port"):
        assert word in r.stdout


def test_the_tui_imports_nothing_from_minisgl():
    code = ("import sys, tui.app, tui.launch; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'minisgl'))")
    r = subprocess.run([sys.executable, "-c", code], check=False, cwd=ROOT, text=True, capture_output=True,
                       timeout=60)
    assert r.stdout.strip() == "[]", r.stderr
