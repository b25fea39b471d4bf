"""`minisgl serve --dp-size 2`: a DataParallelController in front of two scheduler ranks (each its own model
copy and KV pool). The server is the data_parallel scenario's, run once for the whole test session (the
`scenario_runs` fixture), whose client sends six chat completions and then reads what a router reads: the
answers are the offline Engine's greedy text, round_robin puts requests on both ranks in turn (read from the
trace's dp.dispatch events and the ranks' own sched.req_created), routed_dp_rank in the body or the
X-Data-Parallel-Rank header picks the rank (the header wins), /get_load, /health and /flush_cache cover
both ranks, the trace passes `minisgl trace check` and each rank's view opens in the replay app, and the
SIGINT that ends the run leaves no process behind (the run fails otherwise). A rank out of range is a 400
on the session's one-rank server (test_fields_and_logprobs.py) and is refused by the HTTP server's check
with two ranks (test_dp_controller.py); a rank that cannot start fails the server, below."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tracer.check import check_trace
from tracer.dp_ranks import dp_scheduler_procs, pick_rank
from tracer.reader import TraceTail

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def ran(scenario_runs):
    return scenario_runs("data_parallel")


def _dispatches(trace) -> dict[str, dict]:
    """rid -> the attrs of its dp.dispatch, and the scheduler process that created the request."""
    created = {ev.rid: ev.proc for ev in trace.events if ev.name == "sched.req_created"}
    return {ev.rid: {**ev.attrs, "created_by": created.get(ev.rid)} for ev in trace.events
            if ev.name == "dp.dispatch"}


def test_the_server_ran_a_controller_and_two_ranks_and_left_nothing(ran):
    from minisgl.scenarios.data_parallel import SCENARIO

    procs = {p.proc for p in ran.trace.processes()}
    assert procs == {"tokenizer_manager", "data_parallel_controller", "scheduler_dp0", "scheduler_dp1",
                     "detokenizer"}
    # the controller, two ranks and the detokenizer were watched from ready to the SIGINT's end, and all
    # ended with the server, which removed its sockets (scenarios/server.py raises otherwise)
    assert ran.outcome.server_processes >= 4
    probes = ran.outcome.probes
    # what SGLang's router reads: one /get_load entry per rank, and dp_size in /server_info
    assert [entry["dp_rank"] for entry in probes["get_load"]] == [0, 1]
    assert probes["dp_size"] == 2
    # /flush_cache reached both ranks: /health then adds up two empty trees and both ranks' whole pools
    load = probes["load_after_flush"]
    assert probes["flush_cache"]["success"] is True and load["cached_slots"] == 0
    assert load["total_slots"] == load["free_slots"] == 2 * SCENARIO.flags["max_total_tokens"]
    assert load["num_running_reqs"] == load["num_waiting_reqs"] == 0


def test_the_answers_are_the_engines_greedy_text(ran, engine):
    from minisgl.scenarios.data_parallel import WAVES

    asks = [ask for wave in WAVES for ask in wave]
    alone = engine.generate([[{"role": "user", "content": q}] for _, q, *_ in asks],
                            {"max_new_tokens": asks[0][2], "temperature": 0})
    assert len({out["text"] for out in alone}) == len(asks)
    assert [ran.outcome.results[rid]["text"] for rid, *_ in asks] == [out["text"] for out in alone]


def test_round_robin_takes_turns_and_a_chosen_rank_wins(ran):
    seen = _dispatches(ran.trace)
    assert {rid: (d["dp_rank"], d["routed"]) for rid, d in seen.items()} == {
        "R1": (0, False), "R2": (1, False), "R3": (0, False), "R4": (1, False),
        "R5": (1, True),  # routed_dp_rank 1 in the body: round_robin's turn was rank 0
        "R6": (0, True),  # the header's 0 over the body's 1
    }
    for d in seen.values():  # each request ran where the controller sent it
        assert d["method"] == "round_robin" and len(d["loads"]) == 2
        assert d["created_by"] == f"scheduler_dp{d['dp_rank']}"


def test_trace_check_accepts_the_trace_and_each_rank_replays(ran):
    import asyncio

    from tui.app import ReplayApp

    trace = ran.trace
    assert dp_scheduler_procs(trace) == ["scheduler_dp0", "scheduler_dp1"]
    assert check_trace(trace) == []

    async def open_rank(rank: int) -> int:
        view = pick_rank(trace, rank)
        async with ReplayApp(view).run_test(size=(100, 40)) as pilot:
            await pilot.press("end")
            await pilot.pause()
            return len(view.rounds())

    assert all(asyncio.run(open_rank(rank)) > 0 for rank in (0, 1))
    with pytest.raises(ValueError, match="scheduler_dp2"):
        pick_rank(trace, 2)
    tail = TraceTail(ran.folder, dp_rank=1)  # --follow reads only rank 1's scheduler file
    tail.poll()
    assert {p.proc for p in tail.trace.processes()} == {"tokenizer_manager", "data_parallel_controller",
                                                        "scheduler_dp1", "detokenizer"}


@pytest.mark.skipif(__import__("torch").cuda.is_available(),
                    reason="needs a machine where --device cuda fails")
def test_a_rank_that_cannot_start_fails_the_server_with_its_name(tmp_path):
    import subprocess
    import sys

    from tests.server.conftest import ENV

    cmd = [sys.executable, "-m", "minisgl.cli", "serve", "--port", "0", "--dp-size", "2", "--device", "cuda",
           "--log-level", "error"]
    done = subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    assert re.search(r"error: the scheduler_dp[01] process could not start: .*CUDA", done.stderr), done.stderr
    ipc_dir = re.search(r"sockets in (\S+)\)", done.stdout).group(1)
    assert not Path(ipc_dir).exists()
