"""A grading scenario of the tm_wait_loop lab: what the lesson's example (one streamed chat) never asks of the
TokenizerManager: a request without stream (its waiter yields once, at the finish), then a /flush_cache,
whose reply (FlushCacheReqOutput) the receive loop must hand to the waiting endpoint."""

from __future__ import annotations

from minisgl.scenarios.base import Look, Scenario
from minisgl.scenarios.look import first


def drive(url: str) -> dict:
    import httpx

    from minisgl.scenarios.http_client import wait_idle

    body = {"rid": "N", "text": " one two three", "stream": False,
            "sampling_params": {"max_new_tokens": 4, "temperature": 0, "ignore_eos": True}}
    out = httpx.post(f"{url}/generate", json=body, timeout=300)
    if out.status_code != 200:
        raise RuntimeError(f"POST /generate answered {out.status_code}: {out.text[:500]}")
    wait_idle(url)
    flushed = httpx.post(f"{url}/flush_cache", timeout=60)
    if flushed.status_code != 200:
        raise RuntimeError(f"POST /flush_cache answered {flushed.status_code}: {flushed.text[:500]}")
    return {"N": out.json()}


def look_at(trace) -> Look:
    done = first(trace, "http.response_finished", lambda ev: ev.rid == "N")
    line = f"N: one response, finish_reason {done.get('finish_reason')}" if done else "N never finished"
    return Look([line], rid="N")


SCENARIO = Scenario(
    name="tm_outputs",
    title="A request without stream, then a cache flush",
    teaches="_wait_one_response yields once without stream; handle_loop hands a control reply to its waiter",
    lesson="tokenizer-manager",
    flags={"max_total_tokens": 128},
    server=drive,
    look_at=look_at,
)
