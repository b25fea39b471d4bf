"""`minisgl trace export --view ... --format dot|svg|png|mermaid`: what a user types, end to end. Errors
are one line on stderr with exit status 2; svg/png without Graphviz say what to install."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from minisgl.cli import main
from tests.diagrams.helpers import CHAT, ENGINE, HAS_DOT, NO_DOT, SERVER

CLI = [sys.executable, "-m", "minisgl.cli", "trace", "export"]


def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, timeout=120, check=False,
                          env={**os.environ, **(env or {})})


def one_error_line(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("minisgl trace export: error: ")
    return lines[0]


@pytest.mark.skipif(not HAS_DOT, reason=NO_DOT)
def test_svg_through_the_cli(tmp_path):
    out = tmp_path / "chat.svg"
    done = run(CHAT, "--view", "lifecycle", "--format", "svg", "-o", out)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"wrote {out} (lifecycle, svg, ")
    svg = out.read_text(encoding="utf-8")
    assert "<svg" in svg and svg.rstrip().endswith("</svg>")
    for text in ("Scheduler", "ModelRunner", "Detokenizer", "ChatCompletionRequest", "ScheduleBatch",
                 ">rounds 3–7: 5 decode</text>", ">steps</text>"):  # a long line wrapped at a space
        assert text in svg, text


@pytest.mark.skipif(not HAS_DOT, reason=NO_DOT)
@pytest.mark.parametrize("view", ["round", "kv", "radix"])
def test_png_of_each_view(view, tmp_path, capsys):
    out = tmp_path / f"{view}.png"
    assert main(["trace", "export", str(ENGINE), "--view", view, "--rid", "req-b", "--format", "png",
                 "-o", str(out)]) == 0
    assert out.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert f"({view}, png, " in capsys.readouterr().out


def test_view_defaults_to_svg_and_lifecycle_to_a_named_file(tmp_path, capsys):
    folder = shutil.copytree(SERVER, tmp_path / "trace")
    assert main(["trace", "export", str(folder), "--format", "dot"]) == 0  # lifecycle of the only request
    assert (folder / "lifecycle.dot").read_text().startswith("digraph lifecycle {")
    assert main(["trace", "export", str(folder), "--view", "kv", "--rid", "s1", "--round", "2",
                 "--format", "dot"]) == 0
    assert (folder / "kv-s1-round2.dot").exists()
    assert main(["trace", "export", str(folder), "--view", "radix", "--format", "mermaid"]) == 0
    assert (folder / "radix.mmd").read_text().splitlines()[3] == "flowchart TD"
    assert "wrote" in capsys.readouterr().out


def test_dot_to_stdout(capsysbinary):
    assert main(["trace", "export", str(ENGINE), "--view", "lifecycle", "--rid", "req-b", "--format", "dot",
                 "-o", "-"]) == 0
    out = capsysbinary.readouterr().out.decode()
    assert out.startswith("digraph lifecycle {") and "Lifecycle of request req-b" in out


def test_perfetto_is_still_the_default_and_ignores_view(tmp_path):
    for extra in ([], ["--view", "kv", "--format", "perfetto"]):
        out = tmp_path / "p.json"
        assert main(["trace", "export", str(SERVER), *extra, "-o", str(out)]) == 0
        assert "traceEvents" in json.loads(out.read_text())


@pytest.mark.parametrize("args,message", [
    (["--view", "lifecycle", "--rid", "nope", "--format", "dot"], "no request 'nope' in the trace (it has req-a, req-b)"),
    (["--view", "kv", "--round", "9", "--format", "dot"], "round 9 is not in the trace (it has rounds 1–5)"),
    (["--view", "lifecycle", "--format", "dot"], "the lifecycle view follows one request: give --rid"),
    (["--view", "kv", "--format", "mermaid"], "the kv view has no mermaid form"),
    (["--view", "radix", "--round", "2", "--all-rounds", "--format", "dot"], "give --round N or --all-rounds"),
    (["--view", "round", "--rid", "req", "--format", "dot"], "'req' is the start of 2 request ids"),
])
def test_errors_are_one_line(args, message):
    assert message in one_error_line(run(ENGINE, *args))


def test_svg_without_graphviz_says_what_to_install(tmp_path):
    no_dot = {"PATH": str(tmp_path)}  # an empty folder: no `dot` anywhere on PATH
    line = one_error_line(run(ENGINE, "--view", "radix", "--format", "svg", "-o", tmp_path / "x.svg", env=no_dot))
    assert "--format svg needs Graphviz's `dot` program" in line
    assert "apt-get install graphviz" in line and "brew install graphviz" in line
    assert not (tmp_path / "x.svg").exists()
    for fmt in ("dot", "mermaid"):  # these need nothing
        done = run(ENGINE, "--view", "radix", "--format", fmt, "-o", tmp_path / f"x.{fmt}", env=no_dot)
        assert done.returncode == 0, done.stderr
        assert (tmp_path / f"x.{fmt}").stat().st_size > 0


def test_lang_zh_draws_the_words_in_chinese(capsys):
    assert main(["trace", "export", str(CHAT), "--view", "lifecycle", "--format", "mermaid", "--lang", "zh",
                 "-o", "-"]) == 0
    zh = capsys.readouterr().out
    assert "ChatCompletionRequest" in zh and "已结束" in zh and "finished" not in zh
    done = run(CHAT, "--format", "dot", "--lang", "fr", "-o", "-")
    assert done.returncode == 2 and "argument --lang: invalid choice: 'fr'" in done.stderr
