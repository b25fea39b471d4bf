"""One chat completion through the real server: HTTP → TokenizerManager → Scheduler → detokenizer → SSE."""

from __future__ import annotations

from minisgl.scenarios.base import Look, Scenario
from minisgl.scenarios.look import batch_of, describe_batch, events

QUESTION = "What is the capital of China?"


def drive(url: str) -> dict:
    from minisgl.scenarios.http_client import stream_chat, wait_idle

    result = stream_chat(url, "R1", QUESTION, max_tokens=12)
    wait_idle(url)
    return {"R1": result}


def look_at(trace) -> Look:
    prefill, decode = batch_of(trace, "R1", "EXTEND"), batch_of(trace, "R1", "DECODE")
    sse = events(trace, "http.sse_chunk", lambda ev: ev.rid == "R1")
    lines = [
        "R1 crosses every process: http.request_received → tm.tokenized → ipc.send → sched.req_created → "
        "… → detok.decoded → tm.waiter_woken → http.sse_chunk.",
        describe_batch(prefill) + ": the whole prompt, one logit row.",
        describe_batch(decode) + ": one row, one token; the decode rounds repeat until a stop.",
        f"{len(sse)} SSE message(s) carried the answer back.",
    ]
    return Look(lines, rid="R1", round=prefill.round)


SCENARIO = Scenario(
    name="one_request",
    title="One chat completion, end to end",
    teaches="the processes, the two ZeroMQ handoffs each way, the type a request has at each step",
    lesson="one-request",
    flags={"max_total_tokens": 256},
    server=drive,
    look_at=look_at,
)
