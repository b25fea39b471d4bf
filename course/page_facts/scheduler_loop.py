"""Facts for lessons/scheduler-loop.md: the five batch variables round by round (admission_budgets),
chunked_req (chunked_prefill), and the rounds of the get_next_batch_to_run lab's scenario (mixed_round)."""

from __future__ import annotations

from minisgl.scenarios.look import events, first
from tracer.fmt import ranges

SCENARIOS = ("admission_budgets", "chunked_prefill", "mixed_round")
HEAD = {
    "en": ("round", "arrived", "last_batch at the start", "joined running_batch", "cur_batch",
           "waiting_queue at the end", "running_batch at the end", "chunked_req at the end"),
    "zh": ("轮次", "新到达", "本轮开始时的 last_batch", "并入 running_batch", "cur_batch",
           "本轮结束时 waiting_queue", "本轮结束时 running_batch", "本轮结束时 chunked_req"),
}


def _one(trace, name, pred=lambda ev: True):
    ev = first(trace, name, pred)
    if ev is None:
        raise ValueError(f"scheduler-loop: no {name} event matches")
    return ev


def _at(trace, name, round):
    return first(trace, name, lambda ev: ev.round == round)


def _list(rids) -> str:
    return ", ".join(rids) if rids else "—"


def _batch(ev, rids=None) -> str:
    return f"{ev.get('forward_mode')}: {_list(ev.rids if rids is None else rids)}" if ev is not None else "—"


def table(trace, last: int, lang: str) -> str:
    """One row per round up to `last`: the five variables, from batch_merged, batch_formed and round_end."""
    lines = ["| " + " | ".join(HEAD[lang]) + " |", "|" + "---|" * len(HEAD[lang])]
    prev = prev_rids = None
    for r in range(1, last + 1):
        formed, end, merged = (_at(trace, n, r) for n in ("sched.batch_formed", "sched.round_end",
                                                           "sched.batch_merged"))
        if formed is None or end is None:
            raise ValueError(f"scheduler-loop: round {r} ran no batch")
        arrived = [ev.rid for ev in events(trace, "sched.req_created", lambda ev: ev.round == r)]
        cells = [str(r), _list(arrived), _batch(prev, prev_rids),
                 _list(merged.get("joined") if merged else []), _batch(formed), _list(end.get("waiting")),
                 _list(end.get("running")), end.get("chunked") or "—"]
        lines.append("| " + " | ".join(cells) + " |")
        # a DECODE cur_batch is running_batch itself, so finished requests were filtered out of it
        prev, prev_rids = formed, end.get("running") if formed.get("forward_mode") == "DECODE" else None
    return "\n".join(lines)


def _budgets(t) -> dict:
    formed = events(t, "sched.batch_formed")
    a_pre = next(ev for ev in formed if "A" in ev.rids)
    a_join = _one(t, "sched.batch_merged", lambda ev: "A" in ev.get("joined"))
    a_dec = next(ev for ev in formed if "A" in ev.rids and ev.get("forward_mode") == "DECODE")
    if _at(t, "sched.round_end", a_pre.round).get("running"):
        raise ValueError("scheduler-loop: running_batch is no longer empty after A's prefill round")
    between = [ev.round for ev in formed if a_pre.round < ev.round < a_dec.round]
    merge = _one(t, "sched.batch_merged", lambda ev: len(ev.get("running")) > len(ev.get("joined")))
    d_in = _one(t, "sched.req_created", lambda ev: ev.rid == "D").round
    d_adm = _one(t, "sched.admission", lambda ev: ev.rid == "D" and ev.get("decision") == "admitted").round
    done = _one(t, "sched.finished", lambda ev: ev.rid in ("A", "B"))
    e_join = _one(t, "sched.batch_merged", lambda ev: "E" in ev.get("joined")).round
    return {
        "table_en": table(t, e_join, "en"), "table_zh": table(t, e_join, "zh"), "table_last": e_join,
        "a_prefill_round": a_pre.round,
        "a_join_round": a_join.round, "a_first_decode": a_dec.round,
        "prefill_first_rounds": ranges(between),
        "prefill_first_batches": [_batch(ev) for ev in formed if ev.round in between],
        "merge_round": merge.round, "merge_joined": merge.get("joined"),
        "merge_running": merge.get("running"),
        "merge_batch": _batch(_at(t, "sched.batch_formed", merge.round)), "d_arrived": d_in,
        "d_admitted": d_adm, "d_waited": d_adm - d_in, "finish_round": done.round,
        "finished_rids": [ev.rid for ev in events(t, "sched.finished", lambda ev: ev.round == done.round)],
        "finish_running": _list(_at(t, "sched.round_end", done.round).get("running")),
        "decode_rounds": ranges([ev.round for ev in formed if ev.get("forward_mode") == "DECODE"
                                 and ev.round <= e_join]),
    }


def _chunked(t) -> dict:
    adm = events(t, "sched.admission",
                 lambda ev: ev.rid == "L" and ev.get("decision") in ("admitted", "chunked"))
    chunked = [ev.round for ev in events(t, "sched.round_end", lambda ev: ev.get("chunked") == "L")]
    excluded = [ev.round
                for ev in events(t, "sched.batch_merged", lambda ev: ev.get("chunked_excluded") == "L")]
    join = _one(t, "sched.batch_merged", lambda ev: "L" in ev.get("joined"))
    appended = [ev.round for ev in t.by_rid("L") if ev.name == "sched.output_appended"]
    return {
        "l_len": _one(t, "sched.req_created", lambda ev: ev.rid == "L").get("input_len"),
        "chunk_size": _one(t, "sched.config").get("chunked_prefill_size"),
        "l_ranges": [f"[{ev.get('extend_range')[0]}, {ev.get('extend_range')[1]})" for ev in adm],
        "l_prefill_rounds": ranges([ev.round for ev in adm]),
        "l_first_round": adm[0].round,
        "l_chunked_rounds": ranges(chunked), "l_excluded_rounds": ranges(excluded),
        "l_join_round": join.round, "l_first_token_round": appended[0],
        "l_table_en": table(t, join.round, "en"), "l_table_zh": table(t, join.round, "zh"),
    }


def _mixed(t) -> dict:
    """The get_next_batch_to_run lab grades on mixed_round: its rounds in the same table, up to its last
    batch."""
    last = max(ev.round for ev in events(t, "sched.round_end"))
    mixed = _one(t, "sched.batch_formed", lambda ev: ev.get("forward_mode") == "MIXED")
    return {"m_table_en": table(t, last, "en"), "m_table_zh": table(t, last, "zh"),
            "m_mixed_round": mixed.round, "m_chunk_size": _one(t, "sched.config").get("chunked_prefill_size")}


def facts(traces) -> dict:
    return {**_budgets(traces["admission_budgets"]), **_chunked(traces["chunked_prefill"]),
            **_mixed(traces["mixed_round"])}
