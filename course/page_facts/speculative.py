"""The speculative decoding part of lessons/overlap.md (scenario ngram_speculative): a TARGET_VERIFY round row
by row, each draft kept or thrown away, and the KV slots of the rejected ones freed. Not a page of its own:
course/page_facts/overlap.py quotes these facts."""

from __future__ import annotations

import json

from course.blocks import batch_rows
from minisgl.scenarios.look import events
from tracer.fmt import ranges

HEAD = {
    "en": ("row", "request", "position", "input token", "the row holds", "target's token here", "kept?",
           "KV slot"),
    "zh": ("行", "请求", "position", "输入 token", "这一行是", "目标模型在此行的 token", "保留？", "KV 槽位"),
}
WORDS = {
    "en": {"last": "its last token", "draft": "draft {}", "match": "yes: equals draft {}",
           "bonus": "yes: the target's own token", "plain": "yes: a plain decode row",
           "thrown": "no: after a mismatch", "freed": "{}, freed"},
    "zh": {"last": "它的最后一个 token", "draft": "草稿 {}", "match": "保留：等于草稿 {}",
           "bonus": "保留：目标模型自己的 token", "plain": "保留：普通的解码行",
           "thrown": "丢弃：在不一致之后", "freed": "{}，已释放"},
}


def quote(text: str) -> str:
    """A token's text as a code span in a table cell."""
    return "`" + json.dumps(text, ensure_ascii=False).replace("|", "\\|") + "`"


def prompt(t, rid: str) -> str:
    """A request's prompt as a code span, from its tm.tokenized event."""
    return quote(next(ev for ev in events(t, "tm.tokenized") if ev.rid == rid).get("text"))


def verify_rows(t, rnd: int) -> list[dict]:
    """The round's verify rows: each request's last token and then its drafts; the token the target chose
    at each row, whether it is kept, and the KV slot (freed when its draft was rejected)."""
    formed = next(ev for ev in events(t, "sched.batch_formed") if ev.round == rnd)
    verified = next(ev for ev in events(t, "sched.spec_verified") if ev.round == rnd)
    sampled = next(ev for ev in events(t, "sched.sampled") if ev.round == rnd)
    rows, out = batch_rows(t, rnd), []
    per_rid = {rid: (d, a) for rid, d, a in zip(verified.rids, verified.get("draft_lens"),
                                                verified.get("accepted_lens"))}
    j = 0
    for i, row in enumerate(rows):
        j = j + 1 if i and rows[i - 1]["rid"] == row["rid"] else 0
        drafts, accepted = per_rid[row["rid"]]
        nxt = rows[i + 1]["input_id"] if j < drafts else None
        out.append({**row, "j": j, "drafts": drafts, "accepted": accepted, "kept": j <= accepted,
                    "target": sampled.get("token_ids")[i], "target_text": sampled.get("texts")[i],
                    "matches": nxt is not None and sampled.get("token_ids")[i] == nxt})
    rejected = events(t, "kv.free", lambda e: e.round == rnd and e.get("reason") == "rejected")
    freed = sorted(s for ev in rejected for s in ev.get("slots"))
    if freed != sorted(r["out_cache_loc"] for r in out if not r["kept"]):
        raise ValueError(f"speculative: round {rnd} freed {freed}, not the slots of its rejected drafts")
    for r in out:
        if r["kept"] and r["j"] < r["accepted"] and not r["matches"]:
            raise ValueError(f"speculative: round {rnd} row {r['row']} was kept but differs from its draft")
    return out


def table(t, rnd: int, lang: str) -> str:
    w = WORDS[lang]
    lines = ["| " + " | ".join(HEAD[lang]) + " |", "|" + "---|" * len(HEAD[lang])]
    for r in verify_rows(t, rnd):
        holds = w["last"] if r["j"] == 0 else w["draft"].format(r["j"])
        if not r["kept"]:
            kept = w["thrown"]
        elif r["drafts"] == 0:
            kept = w["plain"]
        elif r["j"] < r["accepted"]:
            kept = w["match"].format(r["j"] + 1)
        else:
            kept = w["bonus"]
        slot = str(r["out_cache_loc"]) if r["kept"] else w["freed"].format(r["out_cache_loc"])
        lines.append(f"| {r['row']} | {r['rid']} | {r['position']} | {quote(r['text'])} | {holds} "
                     f"| {quote(r['target_text'])} | {kept} | {slot} |")
    return "\n".join(lines)


def facts(t) -> dict:
    verified = events(t, "sched.spec_verified")
    if not verified:
        raise ValueError("speculative: no verify round")
    rows = {ev.round: verify_rows(t, ev.round) for ev in verified}
    reject = next(rnd for rnd, rs in rows.items() if any(not r["kept"] for r in rs))
    best = max(rows, key=lambda rnd: max(r["accepted"] for r in rows[rnd]))
    drafted = [r for r in rows[reject] if r["drafts"]]
    rid, plain = drafted[0]["rid"], next(r["rid"] for r in rows[reject] if not r["drafts"])
    top = [r for r in rows[best] if r["rid"] == rid]
    a_rounds = [ev.round for ev in events(t, "sched.batch_formed") if rid in (ev.rids or ())]
    return {
        "spec_k": max(max(ev.get("draft_lens")) for ev in verified),
        "spec_rid": rid, "spec_plain_rid": plain,
        "spec_verify_rounds": ranges(sorted(rows)),
        "spec_reject_round": reject, "spec_best_round": best,
        "spec_reject_table_en": table(t, reject, "en"), "spec_reject_table_zh": table(t, reject, "zh"),
        "spec_best_table_en": table(t, best, "en"), "spec_best_table_zh": table(t, best, "zh"),
        "spec_reject_rows": len(drafted), "spec_reject_drafts": drafted[0]["drafts"],
        "spec_reject_accepted": drafted[0]["accepted"], "spec_reject_appended": drafted[0]["accepted"] + 1,
        "spec_reject_slots": ranges([r["out_cache_loc"] for r in drafted if not r["kept"]]),
        "spec_reject_draft_texts": ", ".join(quote(r["text"]) for r in drafted[1:]),
        "spec_reject_target_texts": ", ".join(quote(r["target_text"]) for r in drafted if r["kept"]),
        "spec_best_rows": len(top), "spec_best_accepted": top[0]["accepted"],
        "spec_best_drafts": top[0]["drafts"],
        "spec_best_appended": top[0]["accepted"] + 1,
        "spec_tokens": next(ev for ev in events(t, "sched.finished") if ev.rid == rid).get("output_len"),
        "spec_rounds": len(a_rounds), "spec_rounds_list": ranges(a_rounds),
        "spec_prompt": prompt(t, rid), "spec_plain_prompt": prompt(t, plain),
    }
