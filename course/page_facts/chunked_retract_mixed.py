"""Facts for lessons/chunked-retract-mixed.md: a prompt a chunk per round (chunked_prefill), a decode that
runs out of KV slots and retracts a victim (retract), and prompt chunks riding with decode rows
(mixed_round)."""

from __future__ import annotations

from minisgl.scheduler.scheduler import MIN_NEW_TOKEN_RATIO, NEW_TOKEN_RATIO_DECAY
from tracer.fmt import ranges

SCENARIOS = ("chunked_prefill", "retract", "mixed_round")


def _ev(trace, name: str, pred=lambda ev: True) -> list:
    found = [ev for ev in trace.events if ev.name == name and pred(ev)]
    if not found:
        raise ValueError(f"no {name} event matches")
    return found


def _range(r) -> str:
    return f"[{r[0]}, {r[1]})"


def _config(trace, key: str):
    return _ev(trace, "sched.config")[0].get(key)


def _sampled_text(trace, round: int, rid: str) -> str:
    ev = _ev(trace, "sched.sampled", lambda e: e.round == round and rid in (e.rids or ()))[0]
    return repr(ev.get("texts")[ev.rids.index(rid)])


def _chunked(t) -> dict:
    steps = _ev(t, "sched.admission",
                lambda ev: ev.rid == "L" and ev.get("decision") in ("admitted", "chunked"))
    chunks = [ev for ev in steps if ev.get("decision") == "chunked"]
    last = next(ev for ev in steps if ev.get("decision") == "admitted")
    kept = _ev(t, "sched.output_appended", lambda ev: ev.rid == "L")[0]
    if kept.round != last.round:
        raise ValueError("L's first token should come from its last chunk")
    mid = chunks[-1].round
    inserted = _ev(t, "cache.inserted", lambda ev: ev.rid == "L" and ev.round <= last.round)
    return {
        "chunk_size": _config(t, "chunked_prefill_size"),
        "l_input_len": _ev(t, "sched.req_created", lambda ev: ev.rid == "L")[0].get("input_len"),
        "chunk_rounds": [ev.round for ev in steps],
        "chunk_count": len(steps),
        "chunk_ranges": ", ".join(_range(ev.get("extend_range")) for ev in steps),
        "chunk_mid_round": mid,
        "chunk_mid_range": _range(chunks[-1].get("extend_range")),
        "chunk_mid_thrown": _sampled_text(t, mid, "L"),
        "chunk_last_round": last.round,
        "chunk_last_range": _range(last.get("extend_range")),
        "chunk_first_token": _sampled_text(t, last.round, "L"),
        "chunk_inserted": ", ".join(ranges(ev.get("slots")) for ev in inserted),
        "chunk_budget": chunks[0].get("budget"),
    }


def _max_new(t, rid: str) -> int:
    return _ev(t, "sched.req_created",
               lambda ev: ev.rid == rid)[0].get("sampling_params").get("max_new_tokens")


def _retract(t) -> dict:
    victim = _ev(t, "sched.retracted")[0]
    rid, rnd = victim.rid, victim.round
    check = _ev(t, "sched.decode_mem_checked", lambda ev: ev.round == rnd)[0]
    ok = _ev(t, "sched.decode_mem_checked", lambda ev: ev.round == rnd - 1)[0]
    other = next(r for r in check.get("running") if r != rid)
    out_len = {r: max(ev.get("output_len") for ev in _ev(t, "sched.output_appended", lambda e: e.rid == r
                                                         and e.round < rnd)) for r in (rid, other)}
    in_len = {r: _ev(t, "sched.req_created", lambda e: e.rid == r)[0].get("input_len") for r in (rid, other)}
    if (out_len[rid], -in_len[rid], rid) > (out_len[other], -in_len[other], other):
        raise ValueError("the victim should come first in retract_decode's order")
    key = "fewest output tokens" if out_len[rid] != out_len[other] else (
        "longest prompt" if in_len[rid] != in_len[other] else "rid")
    budget = _ev(t, "sched.prefill_budget", lambda ev: other in (ev.get("running_rids") or []) or
                 rid in (ev.get("running_rids") or []))[0]
    adm = _ev(t, "sched.admission",
              lambda ev: ev.round == budget.round and ev.get("decision") == "admitted")[0]
    back = _ev(t, "sched.admission", lambda ev: ev.rid == rid and ev.round > rnd)[0]
    resume = _ev(t, "sched.batch_formed", lambda ev: ev.round == back.round)[0]
    first = _ev(t, "sched.admission", lambda ev: ev.rid == rid)[0]
    freed = _ev(t, "cache.evicted", lambda ev: ev.round == rnd)[0]
    ins = _ev(t, "cache.inserted", lambda ev: ev.round == rnd and ev.rid == rid)[0]
    fin = _ev(t, "sched.finished", lambda ev: ev.rid == rid)[0]
    return {
        "kv_size": _config(t, "kv_size"),
        "victim": rid,
        "survivor": other,
        "retract_round": rnd,
        "full_round": rnd - 1,
        "victim_out": victim.get("output_len"),
        "victim_in": in_len[rid],
        "survivor_out": out_len[other],
        "survivor_in": in_len[other],
        "victim_key": key,
        "victim_key_zh": {"fewest output tokens": "输出 Token 数", "longest prompt": "Prompt 长度",
                          "rid": "rid"}[key],
        "needed": check.get("needed"),
        "room": check.get("available_size") + check.get("evictable_size"),
        "prev_available": ok.get("available_size"),
        "ratio": budget.get("new_token_ratio"),
        "ratio_round": budget.round,
        "ratio_decay": NEW_TOKEN_RATIO_DECAY,  # the engine's constants: no trace event states them
        "ratio_floor": MIN_NEW_TOKEN_RATIO,
        "ratio_future": budget.get("running_future_tokens"),
        "ratio_reserved": budget.get("reserved_tokens"),
        "ratio_room": budget.get("available_size"),
        "ratio_total": budget.get("budgets").get("rem_total_tokens"),
        "ratio_need": adm.get("extend_input_len") + adm.get("future_tokens"),
        "ratio_full_total": (budget.get("available_size") + budget.get("evictable_size")
                             - sum(budget.get("running_future_tokens"))),
        "admitted_late": adm.rid,
        "victim_inserted": len(ins.get("slots")),
        "victim_evicted": len(freed.get("slots")),
        "resume_round": back.round,
        "resume_range": _range(back.get("extend_range")),
        "resume_prefix": back.get("prefix_locked"),
        "resume_rows": len(resume.get("out_cache_loc")),
        "resume_ratio": _ev(t, "sched.prefill_budget",
                            lambda ev: ev.round == back.round)[0].get("new_token_ratio"),
        "first_range": _range(first.get("extend_range")),
        "victim_final": fin.get("output_len"),
        "retract_max_new": _max_new(t, rid),
        "victim_finish_round": fin.round,
        "victim_token": _sampled_text(t, back.round, rid),
    }


def _mixed(t) -> dict:
    mixed = _ev(t, "sched.batch_formed", lambda ev: ev.get("forward_mode") == "MIXED")
    m = mixed[0]
    decoding = m.get("decoding_rids")
    chunk_rid = next(r for r in m.rids if r not in decoding)
    end = _ev(t, "sched.round_end", lambda ev: ev.round == m.round)[0]
    merged = _ev(t, "sched.batch_merged", lambda ev: ev.round == m.round + 1)[0]
    appended = {ev.rid for ev in _ev(t, "sched.output_appended", lambda ev: ev.round == m.round)}
    return {
        "mixed_chunk_size": _config(t, "chunked_prefill_size"),
        "mixed_rounds": [ev.round for ev in mixed],
        "mixed_round": m.round,
        "mixed_rows": len(m.get("out_cache_loc")),
        "mixed_extend_lens": m.get("extend_lens"),
        "mixed_prefix_lens": m.get("prefix_lens"),
        "mixed_decoding": decoding,
        "mixed_chunk_rid": chunk_rid,
        "mixed_logit_rows": m.get("logit_rows"),
        "mixed_kept": sorted(appended),
        "mixed_thrown": _sampled_text(t, m.round, chunk_rid),
        "mixed_decode_token": _sampled_text(t, m.round, decoding[0]),
        "mixed_running_count": len(end.get("running") or []),
        "mixed_chunked_after": end.get("chunked"),
        "mixed_rejoined": merged.get("joined"),
        "mixed_merge_round": merged.round,
        "mixed_excluded": merged.get("chunked_excluded"),
        "mixed_prev_mode": _ev(t, "sched.batch_formed",
                               lambda ev: ev.round == m.round - 1)[0].get("forward_mode"),
        "mixed_next_mode": _ev(t, "sched.batch_formed",
                               lambda ev: ev.round == mixed[-1].round + 1)[0].get("forward_mode"),
    }


def facts(traces) -> dict:
    return {**_chunked(traces["chunked_prefill"]), **_retract(traces["retract"]),
            **_mixed(traces["mixed_round"])}
