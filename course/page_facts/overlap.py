"""Facts for lessons/overlap.md: the overlap scheduler round by round (overlap_schedule): each round formed
while the previous one still runs on the forward thread, FutureMap placeholders and the round that resolves
them, results and finishes one round late, the extra row of a finished request; and n-gram speculative
decoding's draft, verify and accept rows (ngram_speculative, in course/page_facts/speculative.py)."""

from __future__ import annotations

from course.blocks import batch_rows
from course.page_facts import speculative
from course.page_facts.speculative import prompt, quote
from minisgl.scenarios.look import events
from tracer.fmt import ranges

SCENARIOS = ("overlap_schedule", "ngram_speculative")
HEAD = {
    "en": ("round", "scheduler thread forms", "input_ids as formed → as the forward reads them",
           "placeholders for its tokens", "then processes", "finished · extra rows freed"),
    "zh": ("轮次", "调度线程组出", "组批时的 input_ids → forward 实际读到的", "为本轮 token 预留的占位",
           "随后处理", "结束 · 释放多出的行"),
}
WORDS = {"en": {"round": "round {}: ", "dropped": "dropped: {}", "slots": "slots {}", "none": "—",
                "sep": "; "},
         "zh": {"round": "第 {} 轮：", "dropped": "丢弃 {} 的行", "slots": "槽位 {}", "none": "—",
                "sep": "；"}}


def _one(found: list, what: str):
    if not found:
        raise ValueError(f"overlap: no {what}")
    return found[0]


def _ids(values) -> str:
    return ", ".join(str(v) for v in values)


def future_indices(t) -> dict[int, dict[str, int]]:
    """Round -> {rid: the FutureMap index its row's sampled token gets}. alloc_future_indices hands out one
    index per request of each launched round, round robin from 1; `placeholders` checks every one the
    trace shows against this."""
    out, ct = {}, 0
    for ev in events(t, "sched.batch_formed"):
        out[ev.round] = {rid: ct + i + 1 for i, rid in enumerate(ev.rids or [])}
        ct += len(ev.rids or [])
    return out


def placeholders(t) -> list[dict]:
    """Every placeholder in a formed batch: its round, request and id, the token the forward thread read in
    its place, the round that sampled that token, and the round whose processing shows it to the scheduler."""
    formed = {ev.round: ev for ev in events(t, "sched.batch_formed")}
    sampled = {ev.get("batch_round"): ev for ev in events(t, "sched.sampled")}
    indices, out = future_indices(t), []
    for rnd, ev in sorted(formed.items()):
        for row, formed_id in zip(batch_rows(t, rnd), ev.get("input_ids")):
            if formed_id >= 0:
                continue
            rid = row["rid"]
            source = max(r for r in formed if r < rnd and rid in (formed[r].rids or ()))
            result = sampled[source]
            token = result.get("token_ids")[result.rids.index(rid)]
            if token != row["input_id"] or -formed_id != indices[source][rid]:
                raise ValueError(f"overlap: placeholder {formed_id} of round {rnd} is not the token "
                                 f"{rid} got in round {source}")
            out.append({"round": rnd, "rid": rid, "id": formed_id, "token": token, "text": row["text"],
                        "source": source, "seen": result.round})
    return out


def _finished(t) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for ev in events(t, "sched.finished"):
        out.setdefault(ev.round, []).append(ev.rid)
    return out


def extra_rows(t) -> list[dict]:
    """A request that finished while its next round was already launched: that round's row for it, its KV
    slot, and the round that frees the slot (kv.free, reason finished)."""
    formed = {ev.round: ev for ev in events(t, "sched.batch_formed")}
    out = []
    for done in events(t, "sched.finished"):
        batch = formed.get(done.round)
        if batch is None or done.rid not in (batch.rids or ()):
            continue
        slot = batch.get("out_cache_loc")[batch.rids.index(done.rid)]  # a decode batch: one row per request
        freed = _one(events(t, "kv.free", lambda ev: ev.get("reason") == "finished"
                            and slot in ev.get("slots")), f"kv.free of {done.rid}'s extra slot {slot}")
        result = _one(events(t, "sched.sampled", lambda ev: ev.round == done.round), "result")
        token_round = result.get("batch_round")
        out.append({"rid": done.rid, "round": done.round, "slot": slot, "freed": freed.round,
                    "token_round": token_round})
    return out


def table(t, lang: str) -> str:
    """One row per round: what the scheduler thread forms (placeholders and all), what the forward thread
    reads instead, the placeholders its own tokens get, which round's result it then processes, and who
    finishes and which extra rows are freed."""
    w = WORDS[lang]
    formed = {ev.round: ev for ev in events(t, "sched.batch_formed")}
    forward = {ev.round: ev for ev in t.events if ev.name == "model.forward" and ev.ph == "B"}
    sampled = {ev.round: ev for ev in events(t, "sched.sampled")}
    indices, finished = future_indices(t), _finished(t)
    lines = ["| " + " | ".join(HEAD[lang]) + " |", "|" + "---|" * len(HEAD[lang])]
    for rnd in sorted(set(formed) | set(sampled)):
        cells = [str(rnd), w["none"], w["none"], w["none"], w["none"]]
        if rnd in formed:
            ev = formed[rnd]
            cells[1] = f"{ev.get('forward_mode')} {', '.join(ev.rids or [])}"
            ids, read = ev.get("input_ids"), forward[rnd].get("input_ids")
            cells[2] = _ids(ids) if ids == read else f"{_ids(ids)} → {_ids(read)}"
            cells[3] = ", ".join(f"{rid} {-k}" for rid, k in indices[rnd].items())
        if rnd in sampled:
            res = sampled[rnd]
            src = res.get("batch_round")
            kept = [f"{rid} {quote(text)}" for rid, text in zip(res.rids or [], res.get("texts") or [])]
            dropped = [rid for rid in formed[src].rids if rid not in (res.rids or [])]
            gone = [w["dropped"].format(", ".join(dropped))] if dropped else []
            cells[4] = w["round"].format(src) + w["sep"].join(p for p in (", ".join(kept), *gone) if p)
        freed = [s for ev in events(t, "kv.free", lambda e: e.round == rnd and e.get("reason") == "finished")
                 for s in ev.get("slots")]
        end = [", ".join(finished.get(rnd, []))]
        end += [w["slots"].format(ranges(sorted(freed)))] if freed else []
        cells.append(" · ".join(c for c in end if c) or w["none"])
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def threads(t, last: int, lang: str) -> str:
    """The two threads for rounds 1..last as a mermaid sequence diagram: the scheduler launches round N, then
    takes round N-1's result; the forward thread reads round N's placeholders once round N-1 has sampled."""
    zh = lang == "zh"
    formed = {ev.round: ev for ev in events(t, "sched.batch_formed")}
    sampled = {ev.get("batch_round"): ev for ev in events(t, "sched.sampled")}
    forward = {ev.round: ev for ev in t.events if ev.name == "model.forward" and ev.ph == "B"}
    indices = future_indices(t)
    rnd_of = (lambda r: f"第 {r} 轮") if zh else (lambda r: f"round {r}")
    sep = "" if zh else " "
    colon, say = ("：", {"form": "组出", "launch": "启动", "its": "（本轮 token 记作 {}）",
                         "result": "的结果", "none": "没有占位", "process": "处理"}) if zh else (
        ": ", {"form": "form", "launch": "launch", "its": " (its tokens: {})", "result": " result",
               "none": "no placeholder", "process": "process"})
    lines = ["sequenceDiagram", f"    participant S as {'调度线程' if zh else 'scheduler thread'}",
             f"    participant F as {'forward 线程' if zh else 'forward thread'}"]
    for rnd in range(1, last + 1):
        ev = formed[rnd]
        ids = ev.get("input_ids")
        what = f"{ev.get('forward_mode')} {', '.join(ev.rids or [])}"
        decode = ev.get("forward_mode") == "DECODE"
        shown = f"<br/>input_ids {_ids(ids)}" if decode else ""  # a prefill's whole prompts would be too wide
        lines.append(f"    Note over S: {rnd_of(rnd)}{colon}{say['form']} {what}{shown}")
        tokens = _ids(-k for k in indices[rnd].values())
        lines.append(f"    S->>F: {say['launch']}{sep}{rnd_of(rnd)}{say['its'].format(tokens)}")
        if rnd - 1 in sampled:
            res = sampled[rnd - 1]
            got = _ids(f"{rid} {tok}" for rid, tok in zip(res.rids, res.get("token_ids")))
            lines.append(f"    F->>S: {rnd_of(rnd - 1)}{say['result']}{colon}{got}")
        read = forward[rnd].get("input_ids")
        resolve = f"{_ids(ids)} → {_ids(read)}" if ids != read else say["none"]
        lines.append(f"    Note over F: forward {rnd_of(rnd)}{colon}{resolve}")
        if rnd - 1 in sampled:
            lines.append(f"    Note over S: {say['process']}{sep}{rnd_of(rnd - 1)}")
    return "```mermaid\n" + "\n".join(lines) + "\n```"


def _max_new(t, rid: str) -> int:
    return _one(events(t, "sched.req_created", lambda ev: ev.rid == rid), f"{rid}'s creation").get(
        "sampling_params").get("max_new_tokens")


def overlap_facts(t) -> dict:
    phs, extras = placeholders(t), extra_rows(t)
    formed = {ev.round: ev for ev in events(t, "sched.batch_formed")}
    first = [p for p in phs if p["round"] == phs[0]["round"]]
    read = {-p["id"] for p in phs}
    indices = future_indices(t)
    # the first round none of whose placeholders is ever read, though its requests decode on later
    unread = next(r for r, idx in indices.items() if idx and not read & set(idx.values())
                  and all(any(rid in (formed[n].rids or ()) for n in formed if n > r) for rid in idx))
    nxt = min(n for n in formed if n > unread and set(indices[unread]) <= set(formed[n].rids or ()))
    mixed = [p for p in phs if p["round"] == nxt]
    real = [(rid, tok) for rid, tok in zip(formed[nxt].rids, formed[nxt].get("input_ids")) if tok >= 0]
    late = [x for x in extras if x["round"] == extras[0]["round"]]
    last = extras[-1]
    appended = _one(events(t, "sched.output_appended"), "appended token")
    rids = t.rids()
    return {
        **{f"max_new_{rid}": _max_new(t, rid) for rid in rids},
        **{f"prompt_{rid}": prompt(t, rid) for rid in rids},
        "requests": rids,
        "late_arrival": rids[-1],
        "late_arrival_round": _one(events(t, "sched.req_created", lambda ev: ev.rid == rids[-1]),
                                   "arrival").round,
        "table_en": table(t, "en"), "table_zh": table(t, "zh"),
        "threads_en": threads(t, nxt, "en"), "threads_zh": threads(t, nxt, "zh"), "threads_last": nxt,
        "first_forward_round": min(formed), "first_seen_round": appended.round,
        "ph_round": first[0]["round"], "ph_ids": [p["id"] for p in first],
        "ph_rids": [p["rid"] for p in first],
        "ph_tokens": [p["token"] for p in first], "ph_texts": ", ".join(quote(p["text"]) for p in first),
        "ph_source": first[0]["source"], "ph_seen": first[0]["seen"],
        "ph_all": [p["id"] for p in phs], "ph_count": len(phs),
        "unread_round": unread, "unread_ids": [-k for k in indices[unread].values()],
        "unread_rids": list(indices[unread]),
        "unread_seen": _one(events(t, "sched.sampled", lambda ev: ev.get("batch_round") == unread),
                            "result").round,
        "mixed_round": nxt, "mixed_ids": formed[nxt].get("input_ids"),
        "mixed_real_rids": [rid for rid, _ in real], "mixed_real_ids": [tok for _, tok in real],
        "mixed_ph_rids": [p["rid"] for p in mixed], "mixed_ph_ids": [p["id"] for p in mixed],
        "mixed_ph_source": mixed[0]["source"] if mixed else "—",
        "late_round": late[0]["round"], "late_rids": [x["rid"] for x in late],
        "late_token_round": late[0]["token_round"], "late_slots": [x["slot"] for x in late],
        "late_freed_round": late[0]["freed"], "late_batch_rids": formed[late[0]["round"]].rids,
        "last_extra_rid": last["rid"], "last_extra_round": last["round"], "last_extra_slot": last["slot"],
        "last_extra_freed": last["freed"], "last_extra_token_round": last["token_round"],
        "last_batch_round": max(formed),
    }


def facts(traces) -> dict:
    return {**overlap_facts(traces["overlap_schedule"]), **speculative.facts(traces["ngram_speculative"])}
