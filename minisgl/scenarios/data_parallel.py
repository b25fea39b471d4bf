"""Data parallelism: `--dp-size 2` runs two scheduler ranks behind one DataParallelController, each with
its own rounds, KV pool and radix tree. `round_robin` sends the four requests to ranks 0, 1, 0, 1.

The requests go in two waves of two, each sent once the one before has streamed its first token: so they
reach the controller in a fixed order, and each rank is idle when its request arrives, which keeps every
rank's rounds the same on every run (a request that arrives while its rank is mid-run would join it at
whatever round the clock decides)."""

from __future__ import annotations

from minisgl.scenarios.base import Look, Scenario
from minisgl.scenarios.look import events

WAVES = (
    (("R1", "What is the capital of France?", 4), ("R2", "Name a primary color.", 4)),
    (("R3", "What is two plus two?", 4), ("R4", "Say hello in Spanish.", 4)),
)


def drive(url: str) -> dict:
    from minisgl.scenarios.http_client_order import stream_chats_in_order

    results: dict = {}
    for wave in WAVES:
        results.update(stream_chats_in_order(url, list(wave)))
    return results


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
    teaches="--dp-size: the DataParallelController's round_robin dispatch (dp.dispatch), one scheduler "
    "process per rank, each with its own rounds",
    lesson="scale-out",
    flags={"max_total_tokens": 256, "dp_size": 2, "load_balance_method": "round_robin"},
    server=drive,
    look_at=look_at,
)
