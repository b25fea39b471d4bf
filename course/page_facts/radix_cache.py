"""Facts for lessons/radix-cache.md: a prefix hit, lock counts and an LRU eviction (scenario radix_cache),
and the prefix match's cap at input_len - 1 (scenario prefix_cap)."""

from __future__ import annotations

from minisgl.scenarios.look import events, first
from tracer.fmt import ranges

SCENARIOS = ("radix_cache", "prefix_cap")


def _one(trace, name, pred=lambda ev: True):
    ev = first(trace, name, pred)
    if ev is None:
        raise ValueError(f"radix_cache: no {name} event matches")
    return ev


def _tree(trace, round):
    """The radix tree as last emitted up to the end of `round`: {node id: node}."""
    trees = [ev for ev in events(trace, "cache.tree") if ev.round <= round]
    return {n["id"]: n for n in trees[-1].get("nodes")}


def _node_with(tree, slot):
    return next(n for n in tree.values() if slot in n["value"])


def prefix_cap_facts(t) -> dict:
    """B sends A's prompt again once A has finished: every token is cached, the match stops one short."""
    n = _one(t, "sched.req_created", lambda ev: ev.rid == "B").get("input_len")
    hit = _one(t, "sched.prefix_matched", lambda ev: ev.rid == "B")
    if hit.get("prefix_len") != n - 1:
        raise ValueError(f"prefix_cap: B's prefix is {hit.get('prefix_len')} tokens, not input_len - 1")
    adm = _one(t, "sched.admission", lambda ev: ev.rid == "B")
    formed = _one(t, "sched.batch_formed", lambda ev: ev.round == hit.round)
    dup = _one(t, "kv.free", lambda ev: ev.round == hit.round and ev.get("reason") == "duplicate")
    a_slots = _one(t, "cache.inserted", lambda ev: ev.rid == "A").get("slots")
    return {
        "pc_round": hit.round,
        "pc_len": n,
        "pc_prefix_len": hit.get("prefix_len"),
        "pc_matched_slots": ranges(hit.get("matched_slots")),
        "pc_extend_range": f"[{adm.get('extend_range')[0]}, {adm.get('extend_range')[1]})",
        "pc_rows": sum(formed.get("extend_lens")),
        "pc_logit_rows": formed.get("logit_rows"),
        "pc_new_slot": ranges(formed.get("out_cache_loc")),
        "pc_dup_slots": ranges(dup.get("slots")),
        "pc_tree_slot": a_slots[n - 1],
    }


def facts(traces) -> dict:
    return {**radix_cache_facts(traces["radix_cache"]), **prefix_cap_facts(traces["prefix_cap"])}


def radix_cache_facts(t) -> dict:
    formed = events(t, "sched.batch_formed")
    ext = {ev.rids[0]: ev for ev in formed if ev.get("forward_mode") == "EXTEND"}
    a, b, c = ext["A"], ext["B"], ext["C"]
    a_done = _one(t, "sched.finished", lambda ev: ev.rid == "A").round
    a_ins = _one(t, "cache.inserted", lambda ev: ev.rid == "A")
    hit = _one(t, "sched.prefix_matched", lambda ev: ev.rid == "B")
    adm_b = _one(t, "sched.admission", lambda ev: ev.rid == "B")
    if hit.get("prefix_len") == 0:
        raise ValueError("radix_cache: B no longer hits A's prefix")
    tree_a = _tree(t, a.round)  # A's prompt inserted, A still running
    tree_a_done = _tree(t, a_done)
    tree_b = _tree(t, b.round)
    split = _node_with(tree_b, hit.get("matched_slots")[0])
    rest = next(n for n in tree_b.values() if n["parent"] == split["id"]
                and n["value"][0] in a_ins.get("slots"))
    b_new = next(n for n in tree_b.values() if n["value"] == b.get("out_cache_loc"))
    end_b = _one(t, "sched.round_end", lambda ev: ev.round == b.round)
    evict = _one(t, "cache.evicted")
    frees = [ev.get("slots") for ev in events(t, "kv.free", lambda ev: ev.get("reason") == "evicted")]
    budget_c = _one(t, "sched.prefill_budget", lambda ev: ev.round == evict.round)
    c_len = _one(t, "sched.req_created", lambda ev: ev.rid == "C").get("input_len")
    if evict.round != c.round:
        raise ValueError("radix_cache: the eviction is no longer in C's prefill round")
    reused = [s for s in c.get("out_cache_loc") if s in evict.get("slots")]
    tree_c = _tree(t, c.round)
    kept = sorted(s for n in tree_c.values() for s in n["value"] if s not in c.get("out_cache_loc"))
    end_c = _one(t, "sched.round_end", lambda ev: ev.round == c.round)
    return {
        "kv_size": _one(t, "sched.config").get("kv_size"),
        "a_round": a.round,
        "a_len": a.get("extend_lens")[0],
        "a_slots": ranges(a_ins.get("slots")),
        "a_lock_running": _node_with(tree_a, a_ins.get("slots")[0])["lock_ref"],
        "a_done_round": a_done,
        "a_lock_done": _node_with(tree_a_done, a_ins.get("slots")[0])["lock_ref"],
        "a_done_cached": sum(len(n["value"]) for n in tree_a_done.values()),
        "b_round": b.round,
        "b_len": _one(t, "sched.req_created", lambda ev: ev.rid == "B").get("input_len"),
        "b_rows": sum(b.get("extend_lens")),
        "b_prefix_len": hit.get("prefix_len"),
        "b_matched_slots": ranges(hit.get("matched_slots")),
        "b_extend_range": f"[{adm_b.get('extend_range')[0]}, {adm_b.get('extend_range')[1]})",
        "b_new_slots": ranges(b.get("out_cache_loc")),
        "b_prefix_locked": adm_b.get("prefix_locked"),
        "b_kv_room_before": adm_b.get("before")["rem_kv_room"],
        "b_kv_room_after": adm_b.get("after")["rem_kv_room"],
        "split_node": split["id"],
        "split_slots": ranges(split["value"]),
        "split_lock": split["lock_ref"],
        "rest_node": rest["id"],
        "rest_slots": ranges(rest["value"]),
        "rest_lock": rest["lock_ref"],
        "b_new_node": b_new["id"],
        "b_new_lock": b_new["lock_ref"],
        "b_end_cached": end_b.get("cached_slots"),
        "b_end_evictable": end_b.get("evictable_slots"),
        "c_round": c.round,
        "c_len": c_len,
        "c_free_before": budget_c.get("available_size"),
        "c_evictable_before": budget_c.get("evictable_size"),
        "c_short": c_len - budget_c.get("available_size"),
        "evicted_slots": ranges(evict.get("slots")),
        "evicted_count": len(evict.get("slots")),
        "evicted_first": ranges(frees[0]),
        "evicted_second": ranges(frees[1]) if len(frees) > 1 else "",
        "evict_steps": len(frees),
        "c_reused": ranges(reused),
        "c_kept": ranges(kept),
        "c_end_free": end_c.get("free_slots"),
        "b_cached_tokens": _one(t, "sched.finished", lambda ev: ev.rid == "B").get("cached_tokens"),
    }
