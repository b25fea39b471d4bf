"""Facts for lessons/one-request.md: one chat completion through every process (scenario one_request)."""

from __future__ import annotations

from tracer.fmt import ranges

SCENARIOS = ("one_request",)
RID = "R1"


def _one(evs, name, **attrs):
    found = [ev for ev in evs if ev.name == name and all(ev.get(k) == v for k, v in attrs.items())]
    if not found:
        raise ValueError(f"one_request: no {name} {attrs or ''} for {RID}")
    return found[0]


def type_chain(evs) -> list[str]:
    """The type the request has at each handoff, in the order the trace shows them."""
    chain: list[str] = []
    for ev in evs:
        kind = ev.get("type") or (ev.get("msg") if ev.name == "ipc.send" else None)
        if kind and kind not in chain:
            chain.append(kind)
    return chain


def facts(traces) -> dict:
    t = traces["one_request"]
    evs = t.by_rid(RID)
    received = _one(evs, "http.request_received")
    created = _one(evs, "sched.req_created")
    formed = [ev for ev in evs if ev.name == "sched.batch_formed"]
    prefill = next(ev for ev in formed if ev.get("forward_mode") == "EXTEND")
    decodes = [ev for ev in formed if ev.get("forward_mode") == "DECODE"]
    sends = [ev for ev in evs if ev.name == "ipc.send"]
    sse = [ev for ev in evs if ev.name == "http.sse_chunk"]
    done = _one(evs, "http.response_finished")
    finished = _one(evs, "sched.finished")
    last_sampled = [ev for ev in evs if ev.name == "sched.sampled"][-1]
    decoded = [ev for ev in evs if ev.name == "detok.decoded"]
    chain = type_chain(evs)
    usage = done.get("usage")
    return {
        "processes": list(dict.fromkeys(ev.proc for ev in evs)),
        "process_count": len(t.processes()),
        "endpoint": received.get("endpoint"),
        "max_new_tokens": received.get("sampling_params")["max_new_tokens"],
        "input_len": created.get("input_len"),
        "type_chain": " → ".join(chain),
        "type_count": len(chain),
        "prefill_round": prefill.round,
        "prefill_rows": len(prefill.get("out_cache_loc")),
        "prefill_slots": ranges(prefill.get("out_cache_loc")),
        "decode_rounds": len(decodes),
        "first_decode_round": decodes[0].round,
        "last_round": formed[-1].round,
        "decode_slots": ranges([s for ev in decodes for s in ev.get("out_cache_loc")]),
        "to_scheduler": sum(1 for ev in sends if ev.get("dst") == "scheduler"),
        "to_detokenizer": sum(1 for ev in sends if ev.get("dst") == "detokenizer"),
        "to_tm": sum(1 for ev in sends if ev.get("dst") == "tokenizer_manager"),
        "sse_chunks": len(sse),
        "sse_text_chunks": sum(1 for ev in sse if ev.get("delta")),
        "output_tokens": finished.get("output_len"),
        "finish_type": finished.get("finish_reason")["type"],
        "stop_token": last_sampled.get("texts")[-1],
        "stop_token_id": last_sampled.get("token_ids")[-1],
        "last_delta_empty": decoded[-1].get("delta") == "",
        "prompt_tokens": usage["prompt_tokens"],
        "completion_tokens": usage["completion_tokens"],
        "status": done.get("status"),
    }
