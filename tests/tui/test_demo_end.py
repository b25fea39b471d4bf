"""`minisgl demo` ends by opening the replay on its trace in a terminal, and prints the command elsewhere."""

from __future__ import annotations

import argparse

from minisgl.entrypoints import demo_cli
from tests.tracer.helpers import ENGINE


def test_without_a_terminal_it_prints_the_command(capsys):
    assert demo_cli._replay(str(ENGINE), "req-a", interactive=False) == 0
    assert capsys.readouterr().out.strip().endswith(f"minisgl replay {ENGINE} --rid req-a")


def test_in_a_terminal_it_opens_the_replay_on_the_request(monkeypatch, capsys):
    opened: list[argparse.Namespace] = []
    monkeypatch.setattr("tui.launch.run", lambda args: opened.append(args) or 0)
    assert demo_cli._replay(str(ENGINE), "req-b", interactive=True) == 0
    (args,) = opened
    assert (args.dir, args.rid, args.follow) == (str(ENGINE), "req-b", False)
    assert f"$ minisgl replay {ENGINE} --rid req-b" in capsys.readouterr().out


def test_no_replay_keeps_a_terminal_run_non_interactive():
    parser = argparse.ArgumentParser()
    demo_cli.register(parser.add_subparsers())
    args = parser.parse_args(["demo", "--no-replay"])
    assert args.no_replay is True
