"""Every scenario runs, writes a trace that `trace check` accepts and that the replay app opens, says where
to look, and gives the same normalized trace as its golden summary (times, pids and flow ids aside)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from minisgl.cli import main
from minisgl.scenarios import GRADING, NAMES, get
from tests.scenarios.conftest import GRADING_OFFLINE, OFFLINE, SERVED, SERVED_GOLDEN
from tracer.check import check_trace
from tracer.normalize import served_summary_text, summary_text
from tracer.reader import Trace

pytestmark = pytest.mark.slow

GOLDEN = Path(__file__).resolve().parent / "golden"
UPDATE = (
    os.environ.get("MINISGL_UPDATE_GOLDENS") == "1"
)  # see tests/README.md: read the diff before committing


def test_there_are_at_least_twelve_each_named_after_its_concept(capsys):
    assert len(NAMES) >= 12
    assert main(["scenario", "list"]) == 0
    out = capsys.readouterr().out
    for name in NAMES:
        sc = get(name)
        assert sc.name == name and name in out and sc.teaches in out
        assert "max_total_tokens" in sc.flags  # a pool sized by free memory would differ between machines


@pytest.mark.parametrize("name", NAMES + GRADING)
def test_the_trace_checks_and_says_where_to_look(scenario_runs, name):
    ran = scenario_runs(name)
    assert check_trace(ran.trace) == []
    assert ran.trace.level == 3
    look = ran.scenario.look_at(ran.trace)
    assert look.lines and look.rid in ran.trace.rids()
    assert look.round is None or look.round in ran.trace.rounds()


@pytest.mark.parametrize("name", OFFLINE + GRADING_OFFLINE + SERVED_GOLDEN)
def test_the_normalized_trace_equals_its_golden_summary(scenario_runs, name):
    trace = scenario_runs(name).trace
    # served: the TokenizerManager, the controller and the detokenizer interleave concurrent requests as the
    # clock decides, so their events are listed request by request (tracer/normalize.py)
    text = served_summary_text(trace) if name in SERVED_GOLDEN else summary_text(trace)
    path = GOLDEN / f"{name}.txt"
    if UPDATE:
        path.write_text(text)
    assert path.exists(), f"no golden summary for {name}: run with MINISGL_UPDATE_GOLDENS=1 and read the diff"
    assert text == path.read_text(), f"{name}'s trace changed: compare it with {path}"


def test_the_served_summary_ignores_the_order_of_load_polls_but_not_their_number(scenario_runs):
    """dp=2: the detokenizer forwards each scheduler's load report as it comes (recv, send, recv, send on one
    run, recv, recv, send, send on another); the summary reads the same, while a lost report still shows."""
    import dataclasses

    trace = scenario_runs("data_parallel").trace
    polls = sorted(
        (ev for ev in trace.events if ev.proc == "detokenizer" and ev.get("msg") == "GetLoadReqOutput"),
        key=lambda ev: ev.line,
    )[-4:]  # the last poll's (the client's come first, one after the other, then the shutdown's)
    assert sorted(ev.name for ev in polls) == ["ipc.recv", "ipc.recv", "ipc.send", "ipc.send"]
    assert polls[1].name != polls[2].name  # so swapping them gives the run's other order
    lines = {id(polls[1]): polls[2].line, id(polls[2]): polls[1].line}
    swapped = [dataclasses.replace(ev, line=lines[id(ev)]) if id(ev) in lines else ev for ev in trace.events]

    def again(events):
        return Trace(trace.folder, events, trace.processes(), [], trace.tp_rank_events)

    assert served_summary_text(again(swapped)) == served_summary_text(trace)
    assert served_summary_text(again([ev for ev in trace.events if ev is not polls[-1]])) != served_summary_text(trace)


@pytest.mark.anyio
@pytest.mark.parametrize("name", NAMES)
async def test_the_replay_app_opens_on_the_scenario_trace(scenario_runs, name):
    from tui.app import ReplayApp

    ran = scenario_runs(name)
    look = ran.scenario.look_at(ran.trace)
    app = ReplayApp(ran.trace, rid=look.rid)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.press("end")
        await pilot.pause()
        frame = (
            app.frame()
        )  # End: the last event the app shows (the request's own last one, as it follows it)
        assert app.rid == look.rid and frame.state is not None
        assert frame.event.index == ran.trace.by_rid(look.rid)[-1].index


def test_run_prints_where_to_look_and_the_commands(base_engine, tmp_path, capsys, monkeypatch):
    """`minisgl scenario run` end to end (on the session's weights, so the test loads no second model)."""
    import minisgl.scenarios.driver as driver

    real_run = driver.run
    monkeypatch.setattr(
        driver, "run", lambda sc, folder, loaded=None: real_run(sc, folder, loaded=base_engine)
    )
    assert main(["scenario", "run", "shared_prefix", "--trace", str(tmp_path / "t")]) == 0
    out = capsys.readouterr().out
    assert "trace check OK" in out and "what to look at:" in out
    assert f"minisgl replay {tmp_path / 't'} --rid R2" in out
    assert main(["scenario", "run", "no_such_thing"]) == 2
    assert "no scenario named 'no_such_thing'" in capsys.readouterr().err


def test_server_scenarios_are_the_http_ones():
    assert set(SERVED) == {"one_request", "client_disconnect", "data_parallel", "tensor_parallel",
                           "pd_disaggregation", "tool_call"}
