"""The words on each lifecycle handoff: the request's type there and its key facts (extend range,
out_cache_loc, the sampled token and its text), each computed from one trace event."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from tracer import schema as S
from tracer.diagrams.lanes import is_decode_for
from tracer.diagrams.text import cut, joined_text, quoted, token, token_ids
from tracer.event import Event
from tracer.fmt import ranges, short_rid

Described = tuple[str, str, list[str]]  # type, what, facts

# the type a request has at each event, for events that do not carry a `type` attribute
EVENT_TYPE = {S.SCHED_BATCH_FORMED: "ScheduleBatch", S.MODEL_FORWARD: "ForwardBatch",
              S.SCHED_SAMPLED: "GenerationBatchResult", S.DETOK_DECODED: "BatchStrOutput",
              S.HTTP_SSE_CHUNK: "SSE chunk", S.TM_WAITER_WOKEN: "ReqState"}


def merge_repeats(facts: list[str]) -> list[str]:
    """["a", "b", "a", "c"] -> ["a ×2", "b", "c"]: a request matched and refused for rounds on end
    before its admission reads as one line each, in order of first appearance."""
    counts: dict[str, int] = {}
    for f in facts:
        counts[f] = counts.get(f, 0) + 1
    return [f if n == 1 else f"{f} ×{n}" for f, n in counts.items()]


def _admission(ev: Event) -> str:
    decision = ev.get("decision")
    if decision in ("admitted", "chunked"):
        start, end = ev.get("extend_range") or ["?", "?"]
        return f"PrefillAdder: {decision} [{start}, {end})"
    budget = ev.get("budget")
    return f"PrefillAdder: refused ({budget})" if budget else "PrefillAdder: refused"


def _prefix(ev: Event) -> str:
    n = int(ev.get("prefix_len") or 0)
    return f"match_prefix: {n} tokens cached" if n else "match_prefix: nothing cached"


# facts for the lane's next handoff
PENDING: dict[str, Callable[[Event], str]] = {S.SCHED_PREFIX_MATCHED: _prefix, S.SCHED_ADMISSION: _admission}


def _enqueued(ev: Event) -> str:
    return "→ waiting_queue front (retracted)" if ev.get("retracted") else "→ waiting_queue"


def _appended(ev: Event) -> str:
    done = f" · finished: {_reason(ev.get('finish_reason'))}" if ev.get("finished") else ""
    return f"→ output_ids (output_len {ev.get('output_len')}){done}"


def _inserted(ev: Event) -> str:
    return f"KV {ranges(list(ev.get('slots') or []))} → radix tree"


# facts about the lane's latest handoff
FOLDED: dict[str, Callable[[Event], str]] = {S.SCHED_ENQUEUED: _enqueued, S.SCHED_OUTPUT_APPENDED: _appended,
                                             S.CACHE_INSERTED: _inserted}


def _reason(reason) -> str:
    if isinstance(reason, dict):
        extra = ", ".join(f"{k}={v}" for k, v in reason.items() if k != "type" and v is not None)
        return str(reason.get("type")) + (f" ({extra})" if extra else "")
    return str(reason)


def _row_span(ev: Event, rid: str) -> tuple[int, int, int]:
    """(index of the request's first row in out_cache_loc, number of rows, first position)."""
    rids = list(ev.rids or ev.get("rids") or [])
    i = rids.index(rid)
    decode = ev.get("forward_mode") == "DECODE"
    extend = list(ev.get("extend_lens") or [])
    k = sum(1 if decode else extend[j] for j in range(i))
    seq = list(ev.get("seq_lens") or [])
    if decode:
        return k, 1, seq[i] - 1
    return k, extend[i], list(ev.get("prefix_lens") or [])[i]


def batch(ev: Event, rid: str, texts: dict[int, str]) -> tuple[str, list[str]]:
    mode = str(ev.get("forward_mode"))
    rids = list(ev.rids or ev.get("rids") or [])
    k, n, first = _row_span(ev, rid)
    slots = list(ev.get("out_cache_loc") or [])[k: k + n]
    ids = ev.get("input_ids")
    mine = ids[k: k + n] if isinstance(ids, list) else []
    facts = [f"decode row at position {first}" if is_decode_for(ev, rid)
             else f"extend [{first}, {first + n})"]
    if len(mine) == 1:
        facts.append(f"input_ids {token(mine[0], texts)}")
    elif mine:
        facts.append(f"input_ids {token_ids(mine)}")
    facts.append(f"out_cache_loc {ranges(slots)}")
    if len(rids) > 1:
        others = len(rids) - 1
        facts.append(f"with {others} other request{'s' if others > 1 else ''}")
    return f"round {ev.round} · {mode}", facts


def forward(ev: Event, rid: str) -> tuple[str, list[str]]:
    rows = ev.get("num_rows")
    return f"round {ev.round} · {ev.get('forward_mode')}", [_plural(rows, "row") if rows is not None
                                                            else "rows: ?"]


def collectives(ev: Event, ranks: list[int]) -> str:
    """A --tp-size forward's end: which tp ranks ran it and the collectives each made."""
    return (f"tp ranks {' '.join(map(str, ranks))}: {_plural(ev.get('all_reduce') or 0, 'all-reduce')}, "
            f"{_plural(ev.get('all_gather') or 0, 'all-gather')}")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def sampled(ev: Event, rid: str, texts: dict[int, str], kept: bool) -> tuple[str, list[str]]:
    rids = list(ev.get("rids") or ev.rids or [])
    ids = list(ev.get("token_ids") or [])
    tid = ids[rids.index(rid)] if rid in rids and rids.index(rid) < len(ids) else None
    if kept:
        return f"round {ev.round}", [f"next token {token(tid, texts)}"]
    return f"round {ev.round}", [f"token {token(tid, texts)} thrown away: the prompt is still being chunked"]


def message(ev: Event, rid: str) -> list[str]:
    """Facts of an ipc.send for this request: the new output ids a BatchTokenIDOutput carries."""
    outs = ev.get("output_ids")
    rids = list(ev.rids or ([ev.rid] if ev.rid else []))
    if isinstance(outs, list) and rid in rids and rids.index(rid) < len(outs):
        return [f"output_ids {token_ids(list(outs[rids.index(rid)]))}"]
    return []


def describe(ev: Event, texts: dict[int, str]) -> Described | None:
    """Type, what and facts of every other event that makes a handoff; None for events no lane draws."""
    name, typ = ev.name, str(ev.get("type") or EVENT_TYPE.get(ev.name, ""))
    if name == S.HTTP_REQUEST_RECEIVED:
        params = ev.get("sampling_params") or {}
        facts = [f"POST {ev.get('endpoint')}" + (" (stream)" if ev.get("stream") else "")]
        if "max_new_tokens" in params:
            facts.append(f"max_new_tokens {params['max_new_tokens']}")
        return typ or "request", "received", facts
    if name == S.TM_GENERATE_REQ_INPUT:
        return typ, "normalized", [f"rid {short_rid(ev.rid)}"]
    if name == S.TM_TOKENIZED:
        ids = list(ev.get("input_ids") or [])
        facts = [f"{len(ids)} input_ids: {token_ids(ids)}"]
        if isinstance(ev.get("text"), str):
            facts.append(f"text {quoted(cut(ev.get('text')))}")
        return typ, "tokenized", facts
    if name == S.TM_WAITER_WOKEN:
        done = " (finished)" if ev.get("finished") else ""
        return "ReqState", "waiter woken", [f"delta {quoted(str(ev.get('delta_text') or ''))}{done}"]
    if name == S.HTTP_SSE_CHUNK:
        return typ, f"#{ev.get('index')}", [f"delta {quoted(str(ev.get('delta') or ''))}"]
    if name == S.HTTP_RESPONSE_FINISHED:
        usage = ev.get("usage") or {}
        facts = [f"finish_reason {_reason(ev.get('finish_reason'))}", f"status {ev.get('status')}"]
        if usage:
            facts.append(f"usage {usage.get('prompt_tokens')} prompt + {usage.get('completion_tokens')} "
                         "completion")
        return "HTTP response", "finished", facts
    if name == S.HTTP_ERROR:
        return "HTTP response", f"error {ev.get('status')}", [cut(str(ev.get("message")), 60)]
    if name == S.DP_DISPATCH:
        how = "routed by the client" if ev.get("routed") else str(ev.get("method"))
        return ("TokenizedGenerateReqInput", f"dispatched to dp rank {ev.get('dp_rank')}",
                [how, f"loads seen {ev.get('loads')}", f"→ {S.DP_SCHEDULER_PREFIX}{ev.get('dp_rank')}"])
    if name == S.SCHED_REQ_CREATED:
        params = ev.get("sampling_params") or {}
        facts = [f"input_len {ev.get('input_len')}"]
        if "max_new_tokens" in params:
            facts.append(f"max_new_tokens {params['max_new_tokens']}")
        return typ or "Req", "created", facts
    if name == S.SCHED_RETRACTED:
        return "Req", "retracted", [f"output_len {ev.get('output_len')}",
                                    "its KV goes back to the pool or the tree"]
    if name == S.SCHED_ABORT_REQUESTED:
        return "Req", "abort requested", [f"while {ev.get('where')}"]
    if name == S.SCHED_FINISHED:
        return "Req", "finished", [_reason(ev.get("finish_reason")), f"output_len {ev.get('output_len')}",
                                   f"cached_tokens {ev.get('cached_tokens')}"]
    if name == S.SCHED_REFUSED:
        return "Req", "refused", [cut(str(ev.get("message")), 60)]
    if name in DISAGG:  # prefill/decode disaggregation: the request between two servers
        return DISAGG[name](ev)
    if name == S.DETOK_DECODED:
        facts = [f"token_ids {token_ids(list(ev.get('token_ids') or []))}",
                 f"delta {quoted(str(ev.get('delta') or ''))}"]
        if ev.get("held_back_tokens"):
            facts.append(f"{ev.get('held_back_tokens')} tokens held back")
        return typ, "decoded", facts
    return None


QUEUE_NAMES = {"bootstrap": "disagg_prefill_bootstrap_queue", "inflight": "disagg_prefill_inflight_queue",
               "prealloc": "disagg_decode_prealloc_queue", "transfer": "disagg_decode_transfer_queue"}
DISAGG: dict[str, Callable[[Event], Described]] = {
    S.DISAGG_QUEUED: lambda ev: ("Req", f"→ {QUEUE_NAMES.get(ev.get('queue'), ev.get('queue'))}",
                                 [f"room {ev.get('room')}"]),
    S.DISAGG_BOOTSTRAP: lambda ev: ("Req", "paired" if ev.get("mode") == "prefill" else "registered",
                                    [f"peer {ev.get('peer')}",
                                     f"{ev.get('num_slots')} KV slots preallocated"]),
    S.DISAGG_KV_SENT: lambda ev: ("KV rows", "sent", [f"{ev.get('num_tokens')} rows from slots "
                                  f"{ranges(sorted(ev.get('slots') or []))}", f"{ev.get('nbytes')} bytes",
                                  f"first token {ev.get('first_token')}"]),
    S.DISAGG_KV_RECEIVED: lambda ev: ("KV rows", "received", [f"{ev.get('num_tokens')} rows into slots "
                                      f"{ranges(sorted(ev.get('slots') or []))}",
                                      "→ running_batch (PREBUILT)"]),
    S.DISAGG_TRANSFER_DONE: lambda ev: ("Req", "transfer acknowledged", [f"room {ev.get('room')}"]),
}


def summary(events: list[Event], lane: str, run: tuple[int, int], rid: str,
            texts: dict[int, str]) -> Described:
    """A folded run of decode rounds in one lane: how many of each type, and the text they carried."""
    first, last = run
    steps = last - first + 1
    kinds = Counter(str(ev.get("type") or EVENT_TYPE[ev.name]) for ev in events
                    if ev.name in EVENT_TYPE and ev.ph != "E")
    type_ = ", ".join(f"{t} ×{n}" for t, n in kinds.items()) or "events"
    what = f"rounds {first}–{last}: {steps} decode steps" if lane == "sched" else f"rounds {first}–{last}"
    facts: list[str] = []
    if lane == "sched":
        slots, sampled_ids = [], []
        for ev in events:
            if ev.name == S.SCHED_BATCH_FORMED:
                k, n, _ = _row_span(ev, rid)
                slots += list(ev.get("out_cache_loc") or [])[k: k + n]
            elif ev.name == S.SCHED_OUTPUT_APPENDED:
                sampled_ids.append(ev.get("token_id"))
        facts.append(f"out_cache_loc {ranges(sorted(slots))}")
        text = joined_text(sampled_ids, texts)
        facts.append(f"sampled {quoted(cut(text, 48))}" if text is not None
                     else f"sampled {token_ids(sampled_ids)}")
    elif lane == "model":
        facts.append("one DECODE row of this request each")
    else:
        streamed = (S.DETOK_DECODED, S.HTTP_SSE_CHUNK)
        deltas = [str(ev.get("delta") or "") for ev in events if ev.name in streamed]
        if not deltas:  # a request that does not stream: only its waiter is woken
            deltas = [str(ev.get("delta_text") or "") for ev in events if ev.name == S.TM_WAITER_WOKEN]
        if deltas:
            facts.append(f"delta {quoted(cut(''.join(deltas), 48))}")
    return what, type_, facts  # the run leads (bold); the types it stands for follow
