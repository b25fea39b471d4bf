"""Facts for lessons/limits-failures.md: refusals, clamps, aborts, a client that leaves, and what is freed
when.

Scenarios: context_limit (TOO_LONG refused, CLAMPED clamped), abort (WAIT aborted while waiting, RUN while
running, LATER after them), client_disconnect (LEAVER: the abort's round depends on the clock, so only facts
that hold on every run are claimed) and radix_cache (the one place here where kv.free happens: eviction).
"""

from __future__ import annotations

import re
from collections import Counter

from tracer.fmt import ranges

SCENARIOS = ("context_limit", "abort", "client_disconnect", "radix_cache")
FAILURES = ("context_limit", "abort", "client_disconnect")
REASONS = ("evicted", "duplicate", "finished", "retracted", "flush")  # kv.free's vocabulary (trace-events.md)


def _claim(ok: bool, what: str) -> None:
    if not ok:
        raise ValueError(f"limits-failures: the page says {what}, and the trace disagrees")


def _all(t, name, rid=None, **attrs):
    return [ev for ev in t.events if ev.name == name
            and (rid is None or ev.rid == rid or rid in (ev.rids or ()))
            and all(ev.get(k) == v for k, v in attrs.items())]


def _one(t, name, rid=None, **attrs):
    found = _all(t, name, rid, **attrs)
    _claim(len(found) == 1, f"one {name} for {rid} {attrs}")
    return found[0]


def _slots(t, name, rid) -> list[int]:
    return [s for ev in _all(t, name) if ev.rid == rid for s in ev.get("slots") or []]


def _request(t, rid: str, key: str) -> dict:
    """How `rid` left, its tokens, the KV slots it wrote and the slots the radix tree took from it."""
    written, to_tree = _slots(t, "kv.assigned", rid), _slots(t, "cache.inserted", rid)
    _claim(sorted(written) == sorted(to_tree), f"every slot {rid} wrote went to the radix tree")
    fin = _all(t, "sched.finished", rid)
    return {f"{key}_left": fin[-1].get("finish_reason")["type"] if fin else "refused",
            f"{key}_tokens": fin[-1].get("output_len") if fin else 0,
            f"{key}_written": len(written), f"{key}_to_tree": len(to_tree)}


def _context_limit(t) -> dict:
    refused = _one(t, "sched.refused", "TOO_LONG")
    msg = refused.get("message")
    nums = re.search(r"has (\d+) tokens, but at most (\d+) fit: the limit is (\d+) tokens "
                     r"\(context length (\d+), KV cache (\d+) slots\)", msg)
    _claim(nums is not None, "the refusal names both limits")
    prompt, fit, limit, context, kv = (int(n) for n in nums.groups())
    kv_size = _one(t, "sched.config").get("kv_size")
    _claim(prompt == len(_one(t, "tm.tokenized", "TOO_LONG").get("input_ids")), "the prompt length")
    _claim(limit == min(context, kv_size) == fit + 1 and kv == kv_size, "limit = min(context, KV pool)")
    _claim(not _all(t, "sched.req_created", "TOO_LONG"), "a refused request never becomes a Req")
    made = _one(t, "sched.req_created", "CLAMPED")
    clamp = made.get("max_new_tokens_clamped")
    _claim(made.get("input_len") + clamp["to"] == limit, "the clamp fills the limit exactly")
    last = [ev for ev in _all(t, "sched.batch_formed", "CLAMPED")][-1]
    return {"refusal": msg, "too_long_len": prompt, "fit": fit, "limit": limit, "context_len": context,
            "refused_round": refused.round, "clamped_input": made.get("input_len"),
            "clamp_from": clamp["from"], "clamp_to": clamp["to"], "clamped_last_round": last.round,
            "clamped_last_seq": last.get("seq_lens")[0], **_request(t, "TOO_LONG", "too_long"),
            **_request(t, "CLAMPED", "clamped")}


def _abort(t) -> dict:
    wait = _one(t, "sched.abort_requested", "WAIT")
    run = _one(t, "sched.abort_requested", "RUN")
    _claim(wait.get("where") == "waiting" and run.get("where") == "running", "where each abort lands")
    wait_done, run_done = _one(t, "sched.finished", "WAIT"), _one(t, "sched.finished", "RUN")
    _claim(wait_done.round == wait.round, "a waiting request leaves in the round its abort arrives")
    before = [ev for ev in _all(t, "sched.output_appended", "RUN")
              if ev.index < run.index][-1].get("output_len")
    batches = {rid: _all(t, "sched.batch_formed", rid) for rid in ("RUN", "LATER")}
    run_row = batches["RUN"][0].get("req_pool_indices")[0]
    later_row = batches["LATER"][0].get("req_pool_indices")[0]
    _claim(run_row == later_row, "LATER gets the request row RUN gave back")
    first = _all(t, "sched.admission", "WAIT", decision="refused")[0]
    return {"wait_round": wait.round, "first_round": first.round, "wait_budget": first.get("budget"),
            "run_round": run.round, "run_done_round": run_done.round, "run_before": before,
            "run_after": run_done.get("output_len") - before,
            "run_slots": ranges(_slots(t, "kv.assigned", "RUN")), "later_round": batches["LATER"][0].round,
            "pool_row": run_row, **_request(t, "WAIT", "wait"), **_request(t, "RUN", "run"),
            **_request(t, "LATER", "later")}


def _disconnect(t) -> dict:
    err = _all(t, "http.error", "LEAVER")[0]  # the first: where the client went away
    sent = _all(t, "ipc.send", "LEAVER", msg="AbortReq")[0]
    asked = _one(t, "sched.abort_requested", "LEAVER")
    _claim(sent.proc == "tokenizer_manager" and asked.get("where") == "running",
           "AbortReq reaches a running request")
    woken = [ev for ev in _all(t, "tm.waiter_woken", "LEAVER") if ev.index > err.index]
    _claim(not woken, "no waiter wakes after the client left: its ReqState is gone")
    late = [ev for ev in _all(t, "ipc.recv", "LEAVER", msg="BatchStrOutput")
            if ev.proc == "tokenizer_manager" and ev.index > err.index]
    _claim(bool(late), "the last tokens still reach the TokenizerManager")
    return {"status": err.get("status"), "error_message": err.get("message"), "leaver_round": asked.round,
            "leaver_input": _one(t, "sched.req_created", "LEAVER").get("input_len"),
            **_request(t, "LEAVER", "leaver")}


def facts(traces) -> dict:
    out = {**_context_limit(traces["context_limit"]), **_abort(traces["abort"]),
           **_disconnect(traces["client_disconnect"])}
    frees = Counter(ev.get("reason") for s in SCENARIOS for ev in _all(traces[s], "kv.free"))
    _claim(set(frees) <= set(REASONS), "kv.free has only the reasons in the table")
    out.update({f"free_{r}": frees.get(r, 0) for r in REASONS})
    out["failure_frees"] = sum(len(_all(traces[s], "kv.free")) for s in FAILURES)
    rc = traces["radix_cache"]
    evicted = _all(rc, "cache.evicted")[0]
    out.update({"evict_round": evicted.round, "evict_slots": ranges(sorted(evicted.get("slots"))),
                "evict_count": len(evicted.get("slots")),
                "evict_for": next(ev.rid for ev in _all(rc, "kv.assigned") if ev.round == evicted.round)})
    return out
