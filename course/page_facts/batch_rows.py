"""Facts for lessons/batch-rows.md: the classic R1/R2 round (scenario shared_prefix)."""

from __future__ import annotations

from course.blocks import batch_rows
from tracer.fmt import ranges

SCENARIOS = ("shared_prefix",)


def _slot_numbers() -> tuple[int, int]:
    """(the slot the KV pool never hands out, the first one it does), read off a tiny real pool."""
    import torch

    from minisgl.mem_cache.memory_pool import TokenToKVPool

    pool = TokenToKVPool(2, num_layers=1, num_kv_heads=1, head_dim=1, dtype=torch.float32)
    handed = pool.free_slots.tolist()
    (never,) = set(range(pool.size + 1)) - set(handed)
    return never, min(handed)


def facts(traces) -> dict:
    t = traces["shared_prefix"]
    formed = [ev for ev in t.events if ev.name == "sched.batch_formed"]
    extend = next(ev for ev in formed if ev.get("forward_mode") == "EXTEND" and "R2" in (ev.rids or ()))
    decode = next(ev for ev in formed if ev.get("forward_mode") == "DECODE" and "R2" in (ev.rids or ()))
    rows = batch_rows(t, extend.round)
    r1 = [r for r in rows if r["rid"] == "R1"]
    r2 = [r for r in rows if r["rid"] == "R2"]
    match = next(ev for ev in t.by_rid("R2") if ev.name == "sched.prefix_matched")
    adm = next(ev for ev in t.by_rid("R2") if ev.name == "sched.admission")
    r0_slots = next(ev for ev in t.by_rid("R0") if ev.name == "cache.inserted").get("slots")
    drows = batch_rows(t, decode.round)
    never_slot, first_slot = _slot_numbers()
    return {
        "never_slot": never_slot, "first_slot": first_slot,
        "r0_round": next(ev.round for ev in formed if "R0" in (ev.rids or ())),
        "r0_len": next(ev for ev in t.by_rid("R0") if ev.name == "sched.req_created").get("input_len"),
        "r0_slots": ranges(r0_slots),
        "extend_round": extend.round,
        "extend_rows": len(rows),
        "r1_rows": len(r1),
        "r2_rows": len(r2),
        "r1_positions": ranges([r["position"] for r in r1]),
        "r2_positions": ranges([r["position"] for r in r2]),
        "r1_slots": ranges([r["out_cache_loc"] for r in r1]),
        "r2_slots": ranges([r["out_cache_loc"] for r in r2]),
        "r2_prefix_len": match.get("prefix_len"),
        "r2_matched_slots": ranges(match.get("matched_slots")),
        "r2_extend_range": f"[{adm.get('extend_range')[0]}, {adm.get('extend_range')[1]})",
        "r2_input_len": next(ev for ev in t.by_rid("R2") if ev.name == "sched.req_created").get("input_len"),
        "logit_rows": extend.get("logit_rows"),
        "logit_row_count": len(extend.get("logit_rows")),
        "seq_lens": extend.get("seq_lens"),
        "prefix_lens": extend.get("prefix_lens"),
        "extend_lens": extend.get("extend_lens"),
        "decode_round": decode.round,
        "decode_rows": len(drows),
        "decode_positions": ranges(sorted({r["position"] for r in drows})),
        "decode_slots": ranges([r["out_cache_loc"] for r in drows]),
        "decode_seq_lens": decode.get("seq_lens"),
        "kv_size": next(ev for ev in t.events if ev.name == "sched.config").get("kv_size"),
    }
