"""Tensor parallelism: `--tp-size 3` splits every layer over three scheduler ranks (the bundled model's 9
query heads and 3 KV heads: three of each per rank, one KV head). Every rank runs every round's forward on
the same batch; the row-parallel layers sum their partial results with an all-reduce, the logits are put
together with an all-gather, and `model.forward` says how many of each a forward made."""

from __future__ import annotations

from minisgl.scenarios.base import Look, Scenario
from minisgl.scenarios.look import events

QUESTION = "What is the capital of China?"
MAX_TOKENS = 4


def drive(url: str) -> dict:
    from minisgl.scenarios.http_client import stream_chat

    return {"R1": stream_chat(url, "R1", QUESTION, max_tokens=MAX_TOKENS)}


def look_at(trace) -> Look:
    forwards = events(trace, "model.forward", lambda ev: ev.ph == "B")
    ends = events(trace, "model.forward", lambda ev: ev.ph == "E")
    ranks = ", ".join(["scheduler", *sorted(trace.tp_rank_events)])
    lines = [f"{len(trace.tp_rank_events) + 1} ranks ran each of the {len(forwards)} forwards "
             f"({ranks}; `minisgl trace check` compares them)"]
    for ev, end in list(zip(forwards, ends))[:2]:
        lines.append(f"round {ev.round}: {ev.get('forward_mode')} forward of {ev.get('num_rows')} row(s), "
                     f"{end.get('all_reduce')} all-reduce(s) and {end.get('all_gather')} all-gather(s) "
                     "on each rank")
    return Look(lines, rid="R1", round=forwards[0].round if forwards else None)


SCENARIO = Scenario(
    name="tensor_parallel",
    title="Tensor parallelism: every layer split over three ranks",
    teaches="--tp-size: one scheduler process per rank, the same rounds on each, the all-reduces and "
    "all-gathers of every forward",
    lesson="scale-out",
    flags={"max_total_tokens": 256, "tp_size": 3},
    server=drive,
    look_at=look_at,
)
