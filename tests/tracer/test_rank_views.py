"""The views of a trace with several scheduler ranks, on the real runs of the data_parallel (--dp-size 2)
and tensor_parallel (--tp-size 3) scenarios: `trace show`'s rounds table names each round's rank, and the
lifecycle diagram draws the controller's dispatch and the rank a request ran on, or the tp ranks and
collectives of every forward. (A single scheduler's tables and diagrams are pinned by test_show.py and the
diagram goldens.)"""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from tests.diagrams.helpers import squashed
from tracer.diagrams import build_graph, render_diagram
from tracer.show import rounds_table

pytestmark = pytest.mark.slow


def table_rows(table) -> list[list[str]]:
    columns = [list(col.cells) for col in table.columns]
    return [list(row) for row in zip(*columns)]


def headers(table) -> list[str]:
    return [str(col.header) for col in table.columns]


def test_dp_rounds_table_has_a_rank_column_and_every_rank_s_rounds(scenario_runs):
    trace = scenario_runs("data_parallel").trace
    table = rounds_table(trace)
    assert headers(table)[:3] == ["dp rank", "round", "mode"] and "tp" not in headers(table)
    rows = table_rows(table)
    dispatch = {ev.rid: ev.get("dp_rank") for ev in trace.events if ev.name == "dp.dispatch"}
    # round_robin in arrival order, then R5 and R6 on the ranks their client chose
    assert dispatch == {"R1": 0, "R2": 1, "R3": 0, "R4": 1, "R5": 1, "R6": 0}
    for rank in (0, 1):
        mine = [row for row in rows if row[0] == str(rank)]
        # each rank counts its own rounds from 1 and runs only the requests dispatched to it
        assert [row[1] for row in mine] == [str(n) for n in range(1, len(mine) + 1)]
        assert {row[3] for row in mine} == {rid for rid, r in dispatch.items() if r == rank}
        assert [row[2] for row in mine] == ["EXTEND", "DECODE", "DECODE", "DECODE"] * 3
    console = Console(file=io.StringIO(), width=80, record=True, color_system=None)
    console.print(table)
    assert max(len(line) for line in console.export_text().splitlines()) <= 80


def test_dp_lifecycle_draws_the_dispatch_and_the_rank_s_scheduler(scenario_runs):
    trace = scenario_runs("data_parallel").trace
    graph = build_graph(trace, "lifecycle", rid="R2")
    lanes = {c.id: c for c in graph.clusters}
    assert list(lanes) == ["tm", "dp", "sched", "model", "detok"]
    (dispatch,) = lanes["dp"].nodes
    assert "dispatched to dp rank 1" in dispatch.label and "round_robin" in dispatch.label
    titles = {lane: c.label.replace("\n", " ") for lane, c in lanes.items()}  # a lane's title wraps at spaces
    assert "scheduler_dp1 process: dp rank 1" in titles["sched"]
    assert "scheduler_dp1 process: dp rank 1" in titles["model"]
    edges = {(e.src, e.dst) for e in graph.edges
             if squashed(str(e.attrs.get("label", ""))).startswith("TokenizedGenerateReqInput")}
    assert edges == {("tm_3", dispatch.id), (dispatch.id, "sched_1")}  # TM -> controller -> rank 1
    dot = render_diagram(trace, "lifecycle", "dot", rid="R2")
    assert "no send in the trace" not in dot and "never received" not in dot
    mermaid = render_diagram(trace, "lifecycle", "mermaid", rid="R2")
    assert "participant DP as DataParallelController" in mermaid
    # the round view draws the batch of R2's own rank (rank 1's round 1), not a mix of both ranks
    round_dot = render_diagram(trace, "round", "dot", rid="R2")
    assert "no batch" not in round_dot and "<B>R2</B>" in round_dot


def test_tp_rounds_table_and_lifecycle_show_every_rank_s_forward(scenario_runs):
    trace = scenario_runs("tensor_parallel").trace
    assert sorted(trace.tp_rank_events) == ["scheduler_tp1", "scheduler_tp2"]
    table = rounds_table(trace)
    assert "tp" in headers(table) and "dp rank" not in headers(table)
    tp = headers(table).index("tp")
    rows = table_rows(table)
    assert rows and all(row[tp] == "0-2" for row in rows)

    ends = [ev for ev in trace.events if ev.name == "model.forward" and ev.ph == "E"]
    assert len(ends) == len(rows) and all(ev.get("tp_size") == 3 for ev in ends)
    graph = build_graph(trace, "lifecycle", rid="R1", all_rounds=True)
    model = next(c for c in graph.clusters if c.id == "model")
    assert "scheduler, scheduler_tp1, scheduler_tp2 processes: tp ranks 0-2" in model.label.replace("\n", " ")
    assert len(model.nodes) == len(ends)
    for node, ev in zip(model.nodes, ends):
        collectives = f"{ev.get('all_reduce')} all-reduces, {ev.get('all_gather')} all-gather"
        assert f"tp ranks 0 1 2: {collectives}" in node.label.replace("<BR/>", " ")


def test_the_replay_s_round_pane_names_the_tp_ranks_of_each_forward(scenario_runs):
    """The replay app on a --tp-size 3 trace: at each round's end the round pane's title says which ranks ran
    the forward and its collectives, read from every rank's model.forward (the table is rank 0's batch)."""
    import asyncio

    from tracer.replay import replay
    from tui.app import ReplayApp
    from tui.keys import TABS

    trace = scenario_runs("tensor_parallel").trace
    ends = {ev.round: ev for ev in trace.events if ev.name == "model.forward" and ev.ph == "E"}
    rounds = [state.round for state in replay(trace) if state.batch is not None]

    async def titles() -> list[str]:
        app = ReplayApp(trace)
        out = []
        async with app.run_test(size=(160, 45)) as pilot:
            await pilot.press(str(TABS.index("round") + 1))
            for _ in rounds:
                await pilot.press("right_square_bracket")
                await pilot.pause()
                out.append(app.panes["round"].title_text.plain)
        return out

    got = asyncio.run(titles())
    assert rounds and len(got) == len(rounds)
    for n, title in zip(rounds, got):
        end = ends[n]
        assert f"round {n} " in title and (f"tp ranks 0 1 2: {end.get('all_reduce')} all-reduces, "
                                             f"{end.get('all_gather')} all-gather") in title, title
