"""Facts for lessons/admission.md: the PrefillAdder's budgets, each refusing once (admission_budgets), and the
lpm policy's sort (lpm_order)."""

from __future__ import annotations

from minisgl.scenarios.look import events, first
from tracer.fmt import ranges

SCENARIOS = ("admission_budgets", "lpm_order")
# the budget names in sched.admission's `budget` field, and the prefix of this page's facts about each
REFUSALS = {"max_prefill_tokens": "prefill", "chunked_prefill_size": "chunk",
            "max_running_requests": "running", "kv_cache": "kv"}


def _one(trace, name, pred=lambda ev: True):
    ev = first(trace, name, pred)
    if ev is None:
        raise ValueError(f"admission: no {name} event matches")
    return ev


def _num(x):
    return int(x) if isinstance(x, float) and x.is_integer() else x


def _budget_facts(t) -> dict:
    out = {}
    adm = events(t, "sched.admission")
    for budget, key in REFUSALS.items():
        ev = _one(t, "sched.admission",
                  lambda e: e.get("decision") == "refused" and e.get("budget") == budget)
        before = ev.get("before")
        admitted = [e for e in adm if e.round == ev.round and e.get("decision") == "admitted"]
        out.update({
            f"{key}_round": ev.round, f"{key}_rid": ev.rid, f"{key}_extend": ev.get("extend_input_len"),
            f"{key}_future": ev.get("future_tokens"),
            f"{key}_left": {"prefill": before["rem_input_tokens"], "chunk": before["rem_chunk_tokens"],
                            "running": before["rem_running"], "kv": _num(before["rem_total_tokens"])}[key],
            f"{key}_before_rid": admitted[-1].rid if admitted else "",
            f"{key}_before_extend": admitted[-1].get("extend_input_len") if admitted else 0,
        })
    kv = _one(t, "sched.admission", lambda e: e.get("budget") == "kv_cache")
    start = _one(t, "sched.prefill_budget", lambda e: e.round == kv.round)
    out.update(kv_need=kv.get("need"), kv_reserved=_num(start.get("reserved_tokens")),
               kv_ratio=start.get("new_token_ratio"), kv_running=start.get("running_rids"),
               kv_running_future=start.get("running_future_tokens"), kv_available=start.get("available_size"),
               kv_evictable=start.get("evictable_size"))
    later = _one(t, "sched.admission", lambda e: e.rid == kv.rid and e.get("decision") == "admitted")
    later_start = _one(t, "sched.prefill_budget", lambda e: e.round == later.round)
    out.update(kv_admit_round=later.round, kv_admit_total=_num(later.get("before")["rem_total_tokens"]),
               kv_admit_running=len(later_start.get("running_rids")))
    stop = _one(t, "sched.admission_stopped", lambda e: e.round == out["running_round"])
    out["running_not_considered"] = stop.get("not_considered")
    skipped = [e.round for e in events(t, "sched.prefill_skipped")]
    out["skipped_rounds"] = ranges(skipped)
    out["skipped_first"] = skipped[0]
    return out


def _first_round(t) -> dict:
    """Round one: the starting budgets, and what the first admitted request spent of each."""
    start = _one(t, "sched.prefill_budget")
    a = _one(t, "sched.admission", lambda e: e.round == start.round and e.get("decision") == "admitted")
    b, f = a.get("before"), a.get("after")
    out = {"r1_round": start.round, "r1_rid": a.rid, "r1_extend": a.get("extend_input_len"),
           "r1_future": a.get("future_tokens")}
    for name in ("rem_input_tokens", "rem_chunk_tokens", "rem_kv_room", "rem_running", "rem_total_tokens"):
        short = name.removeprefix("rem_").removesuffix("_tokens")
        out[f"r1_{short}"] = f"{_num(b[name])} → {_num(f[name])}"
    nxt = _one(t, "sched.prefill_budget", lambda e: e.round > start.round)
    out.update(r2_round=nxt.round, r2_total=_num(nxt.get("budgets")["rem_total_tokens"]),
               r2_reserved=_num(nxt.get("reserved_tokens")), r2_ratio=nxt.get("new_token_ratio"),
               r2_future=nxt.get("running_future_tokens"), r2_available=nxt.get("available_size"),
               r2_running=nxt.get("running_rids"))
    return out


def _lpm(t) -> dict:
    sort = _one(t, "sched.queue_sorted", lambda e: len(e.get("waiting")) > 1)
    arrived = [e.rid for e in events(t, "sched.enqueued", lambda e: e.round == sort.round)]
    if arrived == sort.get("waiting"):
        raise ValueError("lpm_order: the sort no longer changes the queue")
    match = {e.rid: e.get("prefix_len")
             for e in events(t, "sched.prefix_matched", lambda e: e.round == sort.round)}
    head, tail = sort.get("waiting")[0], sort.get("waiting")[-1]
    adm = _one(t, "sched.admission", lambda e: e.rid == head and e.round == sort.round)
    refused = _one(t, "sched.admission", lambda e: e.rid == tail and e.round == sort.round)
    later = _one(t, "sched.admission", lambda e: e.rid == tail and e.get("decision") == "admitted")
    return {"lpm_round": sort.round, "lpm_arrived": arrived, "lpm_sorted": sort.get("waiting"),
            "lpm_head": head, "lpm_tail": tail, "lpm_head_prefix": match[head],
            "lpm_tail_prefix": match[tail],
            "lpm_head_range": f"[{adm.get('extend_range')[0]}, {adm.get('extend_range')[1]})",
            "lpm_head_extend": adm.get("extend_input_len"), "lpm_tail_budget": refused.get("budget"),
            "lpm_tail_round": later.round}


def facts(traces) -> dict:
    t = traces["admission_budgets"]
    return {**_first_round(t), **_budget_facts(t), **_lpm(traces["lpm_order"])}
