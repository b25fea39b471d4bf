"""Prefill/decode disaggregation: a prefill server and a decode server behind SGLang's router in its PD mode
(`minisgl router --pd-disaggregation`). The router sends each request to both, with the same bootstrap_room;
the prefill server computes the prompt's KV and first token and sends them over ZeroMQ to the decode server,
which decodes the rest. R2 begins with R1's prompt: the prefill server's radix tree holds that prefix. R3
streams: the router sends it to both servers as the others, and passes on what the decode server streams.

Each request is sent once the one before has finished, so each server is idle when a request arrives and its
rounds are the same on every run. The trace is the merge of both servers' traces (prefill/scheduler,
decode/scheduler, ...); the router's rooms are random, the golden summary numbers them in the order they
appear (tracer/normalize.py)."""

from __future__ import annotations

from minisgl.scenarios.base import Look, Scenario
from minisgl.scenarios.look import events

MODEL = "smollm2"  # --served-model-name: the router forwards the client's model id, which the servers check
# (rid, prompt, max_new_tokens): R2 begins with R1's prompt, which the prefill server's radix tree holds by
# then
ASKS = (("R1", "The capital of France is", 3), ("R2", "The capital of France is a city that", 3))
STREAMED = ("R3", "The capital of Italy is", 3)  # (rid, prompt, max_new_tokens), "stream": true


def drive(url: str) -> dict:
    import httpx

    from minisgl.scenarios.http_client import stream_generate

    results = {}
    for rid, text, max_new_tokens in ASKS:  # one after the other: each server is idle when a request comes
        body = {"rid": rid, "text": text,
                "sampling_params": {"max_new_tokens": max_new_tokens, "temperature": 0}}
        resp = httpx.post(f"{url}/generate", json=body, timeout=300)
        if resp.status_code != 200:
            raise RuntimeError(f"{rid}: POST /generate answered {resp.status_code}: {resp.text[:500]}")
        out = resp.json()
        results[rid] = {"rid": rid, "text": out["text"], "output_ids": out.get("output_ids") or [],
                        "finish_reason": out["meta_info"].get("finish_reason")}
    rid, text, max_new_tokens = STREAMED
    results[rid] = stream_generate(url, rid, text, max_new_tokens)  # as the others, but read as it comes
    return results


def look_at(trace) -> Look:
    sent = {ev.rid: ev for ev in events(trace, "disagg.kv_sent")}
    lines = [
        f"disagg.kv_sent: {rid} sends {ev.get('num_tokens')} KV rows ({ev.get('nbytes')} bytes) and its "
        f"first token from prefill/scheduler to decode/scheduler (disagg.kv_received)"
        for rid, ev in sent.items()
    ] + [
        "the trace is both servers' merged: `minisgl replay DIR --server prefill` follows the prefill "
        "server's rounds (default: decode); the lifecycle view draws one request across both",
    ]
    return Look(lines, rid="R1")


SCENARIO = Scenario(
    name="pd_disaggregation",
    title="Prefill/decode disaggregation: two servers behind SGLang's router",
    teaches="--disaggregation-mode prefill|decode behind sglang-router --pd-disaggregation: the bootstrap "
    "room, the disagg_* queues, the KV rows and first token sent from prefill to decode (disagg.kv_sent)",
    lesson="scale-out",
    flags={"max_total_tokens": 256},
    server=drive,
    look_at=look_at,
    server_flags=("--served-model-name", MODEL),
    pd_disaggregation=True,
)
