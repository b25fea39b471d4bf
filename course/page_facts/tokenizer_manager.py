"""Facts for lessons/tokenizer-manager.md: template and tokens, waiters (one_request), the length check and
the clamp (context_limit), abort on disconnect (client_disconnect). Only clock-free facts of the last."""

from __future__ import annotations

import re

SCENARIOS = ("one_request", "context_limit", "client_disconnect")


def _first(evs, name, rid=None):
    for ev in evs:
        if ev.name == name and (rid is None or ev.rid == rid):
            return ev
    raise ValueError(f"no {name} event" + (f" for {rid}" if rid else ""))


def _user_turn(tok) -> tuple[str, int]:
    """The user's message inside the templated text, and how many of the input tokens it takes."""
    texts, ids = tok.get("input_texts"), tok.get("input_ids")
    start = max(i for i in range(len(texts) - 1) if texts[i] == "<|im_start|>" and texts[i + 1] == "user")
    body = start + 3  # <|im_start|> user \n
    end = texts.index("<|im_end|>", body)
    return "".join(texts[body:end]), len(ids[body:end])


def facts(traces) -> dict:
    one, cl, cd = traces["one_request"], traces["context_limit"], traces["client_disconnect"]
    tok = _first(one.events, "tm.tokenized", "R1")
    question, question_tokens = _user_turn(tok)
    woken = [ev for ev in one.by_rid("R1") if ev.name == "tm.waiter_woken"]
    if not woken[-1].get("finished") or any(ev.get("finished") for ev in woken[:-1]):
        raise ValueError("one_request: only R1's last wake should be the finished one")
    # context_limit: one prompt refused, one max_new_tokens clamped
    refused = _first(cl.events, "sched.refused")
    too_long = len(_first(cl.events, "tm.tokenized", refused.rid).get("input_ids"))
    created = _first(cl.events, "sched.req_created")
    clamp = created.get("max_new_tokens_clamped")
    limit = created.get("input_len") + clamp["to"]
    msg = refused.get("message")
    if f"{too_long} tokens" not in msg or f"limit is {limit} tokens" not in msg:
        raise ValueError(f"context_limit: the refusal does not say {too_long} and {limit}: {msg}")
    context = int(re.search(r"context length (\d+)", msg).group(1))
    done = _first(cl.events, "sched.finished", created.rid)
    # client_disconnect: only what holds whatever round the abort lands in
    error = _first(cd.events, "http.error")
    leaver = error.rid
    abort = next(ev for ev in cd.by_rid(leaver) if ev.name == "ipc.send" and ev.get("msg") == "AbortReq")
    gone = _first(cd.events, "sched.finished", leaver)
    if any(ev.name == "http.response_finished" for ev in cd.by_rid(leaver)):
        raise ValueError("client_disconnect: the request that left got a finished response")
    after = [ev for ev in cd.by_rid(leaver) if ev.index > abort.index and ev.proc == "tokenizer_manager"]
    return {
        "question": question,
        "question_tokens": question_tokens,
        "input_len": len(tok.get("input_ids")),
        "template_tokens": len(tok.get("input_ids")) - question_tokens,
        "templated_text": tok.get("text"),
        "woken": len(woken),
        "woken_last_delta": repr(woken[-1].get("delta_text")),
        "tokens": _first(one.events, "sched.finished", "R1").get("output_len"),
        "too_long_rid": refused.rid,
        "too_long_len": too_long,
        "limit": limit,
        "fits": limit - 1,
        "context_len": context,
        "kv_size": _first(cl.events, "sched.config").get("kv_size"),
        "refusal": msg,
        "too_long_rounds": sorted({ev.round for ev in cl.by_rid(refused.rid)
                                   if ev.name == "sched.batch_formed"}) or "none",
        "clamped_rid": created.rid,
        "clamped_input_len": created.get("input_len"),
        "clamp_from": clamp["from"],
        "clamp_to": clamp["to"],
        "clamped_output": done.get("output_len"),
        "clamped_finish": done.get("finish_reason")["type"],
        "leaver": leaver,
        "leaver_status": error.get("status"),
        "leaver_message": error.get("message"),
        "abort_dst": abort.get("dst"),
        "leaver_finish": gone.get("finish_reason")["type"],
        "late_outputs": sum(1 for ev in after if ev.name == "ipc.recv" and ev.get("msg") == "BatchStrOutput"),
        "woken_after_abort": sum(1 for ev in after if ev.name == "tm.waiter_woken"),
        "leaver_left_running": ([ev.get("running") for ev in cd.events if ev.name == "sched.round_end"][-1]
                                or "none"),
    }
