"""Facts for lessons/detokenizer.md (scenario stream_detok): tokens sent every --stream-interval, the bytes of
a Chinese character held back until whole, and a stop string trimmed from the text."""

from __future__ import annotations

from math import gcd

SCENARIOS = ("stream_detok",)


def _of(trace, name: str, rid: str) -> list:
    found = [ev for ev in trace.by_rid(rid) if ev.name == name]
    if not found:
        raise ValueError(f"{rid} has no {name} event")
    return found


def _sends(trace, rid: str) -> list:
    """The BatchTokenIDOutput messages that carry rid's tokens, with the tokens for rid."""
    return [(ev.round, ev.get("output_ids")[ev.rids.index(rid)]) for ev in trace.events
            if ev.name == "ipc.send" and ev.get("msg") == "BatchTokenIDOutput" and rid in (ev.rids or ())]


def _q(text: str) -> str:
    return repr(text)


def facts(traces) -> dict:
    t = traces["stream_detok"]
    appended = {ev.round: ev.get("output_len") for ev in _of(t, "sched.output_appended", "ZH")}
    sends = _sends(t, "ZH")
    sent_at = [appended[r] for r, _ in sends]  # output_len when each message left
    middle = sent_at[1:-1]  # neither the first token nor the finish: these are the interval's
    interval = 0
    for n in middle:
        interval = gcd(interval, n)
    if not middle or interval <= 1:
        raise ValueError(f"cannot read the stream interval from the sends at output_len {sent_at}")

    decoded = _of(t, "detok.decoded", "ZH")
    held = next(ev for ev in decoded if ev.get("held_back_tokens"))
    freed = next(ev for ev in decoded if ev.index > held.index and ev.get("delta"))
    sampled = {ev.round: ev.get("texts")[ev.rids.index("ZH")] for ev in t.by_rid("ZH")
               if ev.name == "sched.sampled"}
    char_tokens = [tid for ev in decoded if held.index <= ev.index <= freed.index
                   for tid in ev.get("token_ids")]
    later = [ev for ev in decoded if ev.index > freed.index]
    non_empty = [ev for ev in decoded if ev.get("delta")]

    stop = _of(t, "detok.decoded", "STOP")
    waiting = next(ev for ev in stop if ev.get("stop_prefix"))
    trimmed = next(ev for ev in stop if ev.get("stop_trimmed"))
    stop_fin = _of(t, "sched.finished", "STOP")[0]
    stop_created = _of(t, "sched.req_created", "STOP")[0]

    return {
        "interval": interval,
        "zh_tokens": _of(t, "sched.finished", "ZH")[0].get("output_len"),
        "zh_rounds": len(appended),
        "zh_messages": len(sends),
        "zh_send_rounds": [r for r, _ in sends],
        "zh_send_sizes": [len(ids) for _, ids in sends],
        "zh_deltas": len(non_empty),
        "zh_delta_rounds": [ev.round for ev in non_empty],
        "zh_first_round": sends[0][0],
        "zh_last_round": sends[-1][0],
        "zh_first_text": _q(sampled[held.round]),
        "held_round": held.round,
        "held_tokens": held.get("held_back_tokens"),
        "held_read_offset": held.get("read_offset"),
        "held_surr_offset": held.get("surr_offset"),
        "freed_round": freed.round,
        "freed_delta": freed.get("delta"),
        "freed_read_offset": freed.get("read_offset"),
        "freed_surr_offset": freed.get("surr_offset"),
        "char_tokens": len(char_tokens),
        "char_bytes": len(freed.get("delta").encode("utf-8")),
        "next_round": later[0].round,
        "next_delta": later[0].get("delta"),
        "next_read_offset": later[0].get("read_offset"),
        "next_surr_offset": later[0].get("surr_offset"),
        "stop_str": _q(stop_created.get("sampling_params").get("stop")[0]),
        "stop_wait_round": waiting.round,
        "stop_wait_prefix": _q(waiting.get("stop_prefix")),
        "stop_wait_delta": _q(waiting.get("delta")),
        "stop_trim_round": trimmed.round,
        "stop_trim_tokens": len(trimmed.get("token_ids")),
        "stop_output_len": stop_fin.get("output_len"),
        "stop_matched": _q(stop_fin.get("finish_reason").get("matched")),
    }
