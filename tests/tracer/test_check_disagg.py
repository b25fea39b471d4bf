"""check_disagg on a merged prefill/decode pair: the prefill server's request must wait for the decode half's
acknowledgement before it finishes, but the decode server's request of the same rid may finish first (it
acknowledged, decoded a few tokens and stopped while the prefill server had not read the ack yet: seen in a
real pair, with the client that leaves after three chunks)."""

from __future__ import annotations

from pathlib import Path

from tracer.check_disagg import check_disagg
from tracer.event import Event
from tracer.reader import Trace

KV = {"room": 7, "num_tokens": 5, "nbytes": 640, "first_token": 42}


def pair(*steps: tuple[str, str, dict]) -> Trace:
    """A merged trace of (proc, name, attrs) steps, in this order on the clock, every one about request A."""
    events = [Event(v=1, seq=i, ts=i, proc=proc, pid=1 if proc.startswith("prefill") else 2, name=name, rid="A",
                    attrs=attrs, time_ns=i, index=i, file=f"{proc.split('/')[0]}.jsonl", line=i + 1)
              for i, (proc, name, attrs) in enumerate(steps)]
    return Trace(Path("merged"), events, [], [])


def steps(prefill_finish_before_ack: bool = False, decode_finish_before_ack: bool = False):
    out = [("decode/scheduler", "disagg.bootstrap", {"room": 7, "mode": "decode"}),
           ("prefill/scheduler", "disagg.kv_sent", KV),
           ("decode/scheduler", "disagg.kv_received", KV)]
    late = [("prefill/scheduler", "sched.finished", {}), ("decode/scheduler", "sched.finished", {})]
    early = [step for step, first in zip(late, (prefill_finish_before_ack, decode_finish_before_ack)) if first]
    ack = [("prefill/scheduler", "disagg.transfer_done", {"room": 7})]
    return out + early + ack + [step for step in late if step not in early]


def test_the_decode_half_may_finish_before_the_prefill_server_reads_the_ack():
    assert check_disagg(pair(*steps())) == []
    assert check_disagg(pair(*steps(decode_finish_before_ack=True))) == []


def test_the_prefill_request_may_not_finish_before_the_ack():
    (error,) = check_disagg(pair(*steps(prefill_finish_before_ack=True)))
    assert error == "disagg: request A finished (prefill.jsonl:4) before its KV transfer was acknowledged"
