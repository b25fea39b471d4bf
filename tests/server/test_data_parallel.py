"""`minisgl serve --dp-size 2`: a DataParallelController in front of two scheduler ranks (each its own model
copy and KV pool). One real server for the module: concurrent chat completions give the offline Engine's
greedy answers, round_robin puts requests on both ranks (read from the trace's dp.dispatch events and the
ranks' own sched.req_created), routed_dp_rank in the body or the X-Data-Parallel-Rank header picks the rank
(the header wins), a rank that does not exist is a 400, /health and /flush_cache combine both ranks, the
trace passes `minisgl trace check` and each rank's view opens in the replay app, and a SIGINT leaves no
process behind."""

from __future__ import annotations

import re
import signal
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.server.conftest import ServeProcess, serve_flags, wait_drained
from tracer.check import check_trace
from tracer.dp_ranks import dp_scheduler_procs, pick_rank
from tracer.reader import TraceTail, load_trace

pytestmark = pytest.mark.slow

DP_FLAGS = {"dtype": "float32", "max_total_tokens": 1024, "context_length": 1024, "max_running_requests": 8}
QUESTIONS = ["What is the capital of China?", "Name a primary color.", "What is 2 plus 2?",
             "Say hello in French."]
MAX_TOKENS = 8


@pytest.fixture(scope="module")
def dp_server(tmp_path_factory):
    trace_dir = tmp_path_factory.mktemp("dp-trace")
    srv = ServeProcess([*serve_flags(DP_FLAGS), "--dp-size", "2", "--load-balance-method", "round_robin",
                             "--trace", str(trace_dir), "--log-level", "warning"]).wait_ready()
    yield srv
    srv.stop(signal.SIGKILL if srv.proc.poll() is None else signal.SIGINT)  # the last test stops it cleanly


@pytest.fixture(scope="module")
def dp_http(dp_server):
    with httpx.Client(base_url=dp_server.url, timeout=300) as client:
        yield client


def _chat(http: httpx.Client, q: str, headers: dict | None = None, **body) -> httpx.Response:
    return http.post("/v1/chat/completions", headers=headers or {},
                     json={"messages": [{"role": "user", "content": q}], "max_tokens": MAX_TOKENS, "temperature": 0,
                           "rid": body.pop("rid", None), **body})


def _dispatches(dp_server) -> dict[str, dict]:
    """rid -> the attrs of its dp.dispatch, and the scheduler process that created the request."""
    trace = load_trace(dp_server.trace_dir)
    created = {ev.rid: ev.proc for ev in trace.events if ev.name == "sched.req_created"}
    return {ev.rid: {**ev.attrs, "created_by": created.get(ev.rid)} for ev in trace.events
            if ev.name == "dp.dispatch"}


def test_the_server_runs_a_controller_and_two_ranks(dp_server, dp_http):
    assert set(dp_server.pids) == {"data_parallel_controller", "scheduler_dp0", "scheduler_dp1", "detokenizer"}
    health = dp_http.get("/health")
    assert health.status_code == 200, health.text
    load = health.json()["load"]
    assert load["total_slots"] == 2 * DP_FLAGS["max_total_tokens"]  # both ranks' KV pools, added up
    assert load["num_running_reqs"] == load["num_waiting_reqs"] == 0
    # what SGLang's router reads: one /get_load entry per rank, and dp_size in /server_info
    assert [entry["dp_rank"] for entry in dp_http.get("/get_load").json()] == [0, 1]
    assert dp_http.get("/server_info").json()["dp_size"] == 2


def test_concurrent_chat_completions_give_the_engines_greedy_text(dp_server, engine):
    from openai import OpenAI

    client = OpenAI(base_url=f"{dp_server.url}/v1", api_key="none", max_retries=0, timeout=300)
    model = client.models.list().data[0].id
    alone = [out["text"] for out in engine.generate([[{"role": "user", "content": q}] for q in QUESTIONS],
                                                     {"max_new_tokens": MAX_TOKENS, "temperature": 0})]
    assert len(set(alone)) == len(QUESTIONS)

    def one(i: int) -> str:
        resp = client.chat.completions.create(model=model, messages=[{"role": "user", "content": QUESTIONS[i]}],
                                              max_tokens=MAX_TOKENS, temperature=0, extra_body={"rid": f"rr{i}"})
        return resp.choices[0].message.content

    with ThreadPoolExecutor(len(QUESTIONS)) as pool:
        assert list(pool.map(one, range(len(QUESTIONS)))) == alone
    # round_robin: in turn, so both ranks got requests, and each request ran where the controller sent it
    seen = {rid: d for rid, d in _dispatches(dp_server).items() if rid.startswith("rr")}
    assert sorted(d["dp_rank"] for d in seen.values()) == [0, 0, 1, 1]
    for d in seen.values():
        assert d["method"] == "round_robin" and d["routed"] is False and len(d["loads"]) == 2
        assert d["created_by"] == f"scheduler_dp{d['dp_rank']}"


@pytest.mark.parametrize(("headers", "body", "rank"), [
    ({}, {"routed_dp_rank": 1}, 1),
    ({}, {"routed_dp_rank": 0}, 0),
    ({"X-Data-Parallel-Rank": "1"}, {}, 1),
    ({"X-Data-Parallel-Rank": "0"}, {"routed_dp_rank": 1}, 0),  # the header wins over the body
])
def test_routed_dp_rank_puts_a_request_on_the_chosen_rank(dp_server, dp_http, headers, body, rank):
    for attempt in range(2):  # twice: round_robin alone would put the second one on the other rank
        rid = f"routed-{rank}-{len(headers)}-{len(body)}-{attempt}"
        resp = _chat(dp_http, "Name a planet.", headers, **body, rid=rid)
        assert resp.status_code == 200, resp.text
        d = _dispatches(dp_server)[rid]
        assert d["routed"] is True and d["dp_rank"] == rank and d["created_by"] == f"scheduler_dp{rank}"


@pytest.mark.parametrize(("headers", "body", "param"), [
    ({}, {"routed_dp_rank": 2}, "routed_dp_rank"),
    ({}, {"data_parallel_rank": 5}, "data_parallel_rank"),
    ({"X-Data-Parallel-Rank": "2"}, {"routed_dp_rank": 0}, None),
])
def test_a_rank_that_does_not_exist_is_a_400(dp_http, headers, body, param):
    resp = _chat(dp_http, "Hi", headers, **body)
    assert resp.status_code == 400, resp.text
    error = resp.json()["error"]
    assert error["type"] == "invalid_request_error" and error["param"] == param
    assert "2 data-parallel ranks (0 to 1)" in error["message"]


def test_a_header_that_is_not_a_number_is_a_400(dp_http):
    resp = _chat(dp_http, "Hi", {"X-Data-Parallel-Rank": "one"})
    assert resp.status_code == 400 and "must be an integer" in resp.json()["error"]["message"]


def test_flush_cache_and_load_cover_both_ranks(dp_http):
    wait_drained(dp_http)
    assert dp_http.post("/flush_cache").json()["success"] is True
    assert dp_http.get("/health").json()["load"]["cached_slots"] == 0


def test_trace_check_accepts_the_trace_and_each_rank_replays(dp_server, dp_http):
    import asyncio

    from tui.app import ReplayApp

    wait_drained(dp_http)
    trace = load_trace(dp_server.trace_dir)
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
    tail = TraceTail(dp_server.trace_dir, dp_rank=1)  # --follow reads only rank 1's scheduler file
    tail.poll()
    assert {p.proc for p in tail.trace.processes()} == {"tokenizer_manager", "data_parallel_controller",
                                                        "scheduler_dp1", "detokenizer"}


def test_sigint_stops_every_process(dp_server):
    assert dp_server.stop(signal.SIGINT) == 0, dp_server.output()[-3000:]
    assert len(dp_server.descendants) >= 4  # the controller, two ranks, the detokenizer
    assert dp_server.alive_descendants() == []
    assert dp_server.ipc_dir and not Path(dp_server.ipc_dir).exists()


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="needs a machine where --device cuda fails")
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
