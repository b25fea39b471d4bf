"""Facts for lessons/sampling-finishing.md: sampled tokens, the three ways to finish (length, a stop string,
a clamped max_new_tokens), and request progress (output_len) against cache progress (cache.inserted)."""

from __future__ import annotations

from tracer.fmt import ranges

SCENARIOS = ("shared_prefix", "stream_detok", "context_limit")


def _one(trace, name: str, rid: str, pred=lambda ev: True):
    found = [ev for ev in trace.by_rid(rid) if ev.name == name and pred(ev)]
    if not found:
        raise ValueError(f"{rid} has no {name} event")
    return found


def _texts(trace, rid: str) -> list[tuple[int, str]]:
    """(round, text) of each token sampled for rid (only the kept ones: each is followed by
    output_appended)."""
    kept = {ev.round for ev in _one(trace, "sched.output_appended", rid)}
    return [(ev.round, ev.get("texts")[ev.rids.index(rid)]) for ev in _one(trace, "sched.sampled", rid)
            if ev.round in kept]


def _quote(text: str) -> str:
    return repr(text)


def facts(traces) -> dict:
    sp, sd, cl = traces["shared_prefix"], traces["stream_detok"], traces["context_limit"]

    # shared_prefix, R1: finishes by length; what the radix tree holds at each step
    created = _one(sp, "sched.req_created", "R1")[0]
    params = created.get("sampling_params")
    fin = _one(sp, "sched.finished", "R1")[0]
    inserted = _one(sp, "cache.inserted", "R1")
    prefill_ins, finish_ins = inserted[0], inserted[-1]
    if finish_ins.round != fin.round or prefill_ins.round >= fin.round:
        raise ValueError("R1 should insert its prompt after prefill and the rest when it finishes")
    r1_texts = _texts(sp, "R1")
    tree_tokens = sum(len(ev.get("slots")) for ev in inserted)
    r0_fin = _one(sp, "sched.finished", "R0")[0]
    r0_batch = next(ev for ev in sp.events if ev.name == "sched.batch_formed" and "R0" in (ev.rids or ()))

    # stream_detok, STOP: a stop string completed by the last token
    stop_created = _one(sd, "sched.req_created", "STOP")[0]
    stop_params = stop_created.get("sampling_params")
    stop_fin = _one(sd, "sched.finished", "STOP")[0]
    stop_texts = _texts(sd, "STOP")
    stop_str = stop_fin.get("finish_reason").get("matched")
    if stop_fin.get("finish_reason").get("type") != "stop" or stop_str not in stop_params.get("stop"):
        raise ValueError("STOP should finish on its stop string")
    tail = [t for _, t in stop_texts[-2:]]
    if "".join(tail).strip() != stop_str.strip():
        raise ValueError(f"the last two tokens {tail} should spell the stop string {stop_str!r}")

    # context_limit, CLAMPED: max_new_tokens cut so that prompt + output fit
    cl_created = _one(cl, "sched.req_created", "CLAMPED")[0]
    clamp = cl_created.get("max_new_tokens_clamped")
    cl_fin = _one(cl, "sched.finished", "CLAMPED")[0]

    return {
        "temperature": params.get("temperature"),
        "top_k": params.get("top_k"),
        "top_p": params.get("top_p"),
        "r1_input_len": created.get("input_len"),
        "r1_max_new": params.get("max_new_tokens"),
        "r1_ignore_eos": "true" if params.get("ignore_eos") else "false",
        "r1_prefill_round": prefill_ins.round,
        "r1_finish_round": fin.round,
        "r1_finish_type": fin.get("finish_reason").get("type"),
        "r1_output_len": fin.get("output_len"),
        "r1_first_text": _quote(r1_texts[0][1]),
        "r1_last_text": _quote(r1_texts[-1][1]),
        "r1_prompt_slots": ranges(prefill_ins.get("slots")),
        "r1_prompt_slot_count": len(prefill_ins.get("slots")),
        "r1_finish_slots": ranges(finish_ins.get("slots")),
        "r1_finish_slot_count": len(finish_ins.get("slots")),
        "r1_tree_tokens": tree_tokens,
        "r1_seq_len": created.get("input_len") + fin.get("output_len"),
        "r0_max_new": _one(sp, "sched.req_created", "R0")[0].get("sampling_params").get("max_new_tokens"),
        "r0_round": r0_batch.round,
        "r0_mode": r0_batch.get("forward_mode"),
        "r0_finish_round": r0_fin.round,
        "stop_str": _quote(stop_str),
        "stop_round": stop_fin.round,
        "stop_prev_round": stop_texts[-2][0],
        "stop_tail": ", ".join(_quote(t) for t in tail),
        "stop_output_len": stop_fin.get("output_len"),
        "stop_max_new": stop_params.get("max_new_tokens"),
        "stop_ignore_eos": "true" if stop_params.get("ignore_eos") else "false",
        "clamp_from": clamp.get("from"),
        "clamp_to": clamp.get("to"),
        "clamp_input_len": cl_created.get("input_len"),
        "clamp_limit": cl_created.get("input_len") + clamp.get("to"),
        "clamp_finish_round": cl_fin.round,
        "clamp_finish_type": cl_fin.get("finish_reason").get("type"),
        "clamp_output_len": cl_fin.get("output_len"),
        "clamp_tree_tokens": sum(len(ev.get("slots")) for ev in _one(cl, "cache.inserted", "CLAMPED")),
    }
