"""Data parallelism: `--dp-size 2` runs two scheduler ranks behind one DataParallelController, each with
its own rounds, KV pool and radix tree. `round_robin` sends the first four requests to ranks 0, 1, 0, 1;
the last two choose their rank, as a router in front of the server may (`routed_dp_rank` in the body, or
the X-Data-Parallel-Rank header, which wins).

The requests go in three waves of two, each sent once the one before has streamed its first token: so they
reach the controller in a fixed order, and each rank is idle when its request arrives, which keeps every
rank's rounds the same on every run (a request that arrives while its rank is mid-run would join it at
whatever round the clock decides). Then the client reads what a router reads (/get_load, /server_info)
and empties both ranks' radix caches (/flush_cache)."""

from __future__ import annotations

from minisgl.scenarios.base import Look, Scenario
from minisgl.scenarios.look import events

WAVES = (
    (("R1", "What is the capital of France?", 4), ("R2", "Name a primary color.", 4)),
    (("R3", "What is two plus two?", 4), ("R4", "Say hello in Spanish.", 4)),
    # the client chooses: R5 in its body, R6 in the header (which wins over its body's choice); left to
    # round_robin, R5 would have gone to rank 0 and R6 to rank 1
    (("R5", "Name a planet.", 4, {"routed_dp_rank": 1}),
     ("R6", "Name a fruit.", 4, {"routed_dp_rank": 1}, {"X-Data-Parallel-Rank": "0"})),
)


def drive(url: str):
    import httpx

    from minisgl.scenarios.driver import Outcome
    from minisgl.scenarios.http_client_order import stream_chats_in_order

    results: dict = {}
    for wave in WAVES:
        results.update(stream_chats_in_order(url, list(wave)))
    with httpx.Client(base_url=url, timeout=300) as http:  # every rank is idle by now
        probes = {"get_load": http.get("/get_load").json(),
                  "dp_size": http.get("/server_info").json()["dp_size"],
                  "flush_cache": http.post("/flush_cache").json(),
                  "load_after_flush": http.get("/health").json()["load"]}
    return Outcome(results=results, probes=probes)


def look_at(trace) -> Look:
    dispatches = events(trace, "dp.dispatch")
    lines = [
        "dp.dispatch: " + ", ".join(f"{ev.rid} → rank {ev.get('dp_rank')} (loads {ev.get('loads')})"
                                    for ev in dispatches),
        "each rank's scheduler (scheduler_dp0, scheduler_dp1) counts its own rounds: "
        "`minisgl trace show` has a rank column, `minisgl replay --dp-rank 1` follows rank 1",
    ]
    first = dispatches[0] if dispatches else None
    return Look(lines, rid=first.rid if first else "R1")


SCENARIO = Scenario(
    name="data_parallel",
    title="Data parallelism: two scheduler ranks behind one controller",
    teaches="--dp-size: the DataParallelController's round_robin dispatch (dp.dispatch), a rank the client "
    "chose (routed_dp_rank, X-Data-Parallel-Rank), one scheduler process per rank, each with its own rounds",
    lesson="scale-out",
    flags={"max_total_tokens": 256, "dp_size": 2, "load_balance_method": "round_robin"},
    server=drive,
    look_at=look_at,
)
