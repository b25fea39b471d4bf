"""Facts for lessons/batch-rows.md: the classic R1/R2 round (scenario shared_prefix), and two new prompts
packed in one batch (scenario packed_rows)."""

from __future__ import annotations

from course.blocks import batch_rows
from tracer.fmt import ranges

SCENARIOS = ("shared_prefix", "packed_rows")


def _slot_numbers() -> tuple[int, int]:
    """(the slot the KV pool never hands out, the first one it does), read off a tiny real pool."""
    import torch

    from minisgl.mem_cache.memory_pool import TokenToKVPool

    pool = TokenToKVPool(2, num_layers=1, num_kv_heads=1, head_dim=1, dtype=torch.float32)
    handed = pool.free_slots.tolist()
    (never,) = set(range(pool.size + 1)) - set(handed)
    return never, min(handed)


HEADS = {"en": (("request", "req_pool_idx", "its req_to_token row: the KV slot of each position"),
                ("row", "request", "position", "reads the keys and values in KV slots")),
         "zh": (("请求", "req_pool_idx", "它的 req_to_token 行：每个位置的 KV 槽位"),
                ("行", "请求", "position", "读取这些 KV 槽位里的 key 和 value"))}


def packed_facts(t) -> dict:
    """Two new prompts in one EXTEND: their rows, req_to_token rows and which slots each row attends to."""
    formed = [ev for ev in t.events if ev.name == "sched.batch_formed"]
    ext = next(ev for ev in formed if ev.get("forward_mode") == "EXTEND")
    lens, slots = ext.get("extend_lens"), ext.get("out_cache_loc")
    if any(ext.get("prefix_lens")):
        raise ValueError("packed_rows: a request found a cached prefix: its rows would not start at 0")
    starts = [sum(lens[:i]) for i in range(len(lens))]
    own = [slots[s : s + n] for s, n in zip(starts, lens)]  # each request's req_to_token row (no prefix)
    out = {"pr_round": ext.round, "pr_rids": ", ".join(ext.rids), "pr_extend_lens": lens,
           "pr_rows": len(slots), "pr_starts": starts, "pr_cu": starts + [len(slots)],
           "pr_pool_indices": ext.get("req_pool_indices"), "pr_logit_rows": ext.get("logit_rows"),
           "pr_b_first_row": starts[1], "pr_a_len": lens[0], "pr_b_len": lens[1]}
    for lang, (row_head, mask_head) in HEADS.items():
        table = ["| " + " | ".join(row_head) + " |", "|---|---|---|"]
        table += [f"| {rid} | {idx} | {', '.join(map(str, row))} |"
                  for rid, idx, row in zip(ext.rids, ext.get("req_pool_indices"), own)]
        mask = ["| " + " | ".join(mask_head[:3]) + " | " + " | ".join(map(str, slots)) + " |",
                "|" + "---|" * (3 + len(slots))]
        for rid, start, row in zip(ext.rids, starts, own):
            for p in range(len(row)):
                seen = set(row[: p + 1])  # its own tokens up to its position, nothing of the other request's
                marks = " | ".join("●" if s in seen else " " for s in slots)
                mask.append(f"| {start + p} | {rid} | {p} | {marks} |")
        out[f"pr_rows_table_{lang}"], out[f"pr_mask_{lang}"] = "\n".join(table), "\n".join(mask)
    return out


def facts(traces) -> dict:
    return {**shared_prefix_facts(traces["shared_prefix"]), **packed_facts(traces["packed_rows"])}


def shared_prefix_facts(t) -> dict:
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
