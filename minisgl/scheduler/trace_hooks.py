"""The scheduler's trace events, kept out of scheduler.py so that file reads like the algorithm.

Each function is called behind `if tracer.enabled:`, so none of this runs when tracing is off.
Event names and fields: lessons/docs/reference/trace-events.md.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

from tracer.api import LEVEL_TENSORS, LEVEL_TOKENS, tracer

if TYPE_CHECKING:
    from minisgl.scheduler.req import Req
    from minisgl.scheduler.schedule_batch import ScheduleBatch
    from minisgl.scheduler.schedule_policy import PrefillAdder
    from minisgl.scheduler.scheduler import Scheduler


def config(sched: Scheduler) -> None:
    a = sched.server_args
    tracer.event("sched.config", kv_size=sched.token_to_kv_pool.size, max_running_requests=a.max_running_requests,
                 max_prefill_tokens=a.max_prefill_tokens, chunked_prefill_size=a.chunked_prefill_size,
                 schedule_policy=sched.policy.policy, disable_radix_cache=a.disable_radix_cache,
                 enable_mixed_chunk=a.enable_mixed_chunk)


def req_created(req: Req, queue_len: int, asked_max_new_tokens: int) -> None:
    attrs = {}
    if asked_max_new_tokens != req.sampling_params.max_new_tokens:
        attrs["max_new_tokens_clamped"] = {"from": asked_max_new_tokens, "to": req.sampling_params.max_new_tokens}
    tracer.event("sched.req_created", rid=req.rid, type="Req", input_len=len(req.origin_input_ids),
                 sampling_params=req.sampling_params.to_dict(), **attrs)
    tracer.event("sched.enqueued", rid=req.rid, queue_len=queue_len, retracted=False)


def prefill_skipped(running: list[Req], max_running_requests: int, waiting: list[Req]) -> None:
    """get_new_batch_prefill returned before building a PrefillAdder: no request slot is left."""
    if waiting:
        tracer.event("sched.prefill_skipped", reason="max_running_requests", num_running=len(running),
                     max_running_requests=max_running_requests, waiting=[r.rid for r in waiting])


def admission(sched: Scheduler, adder: PrefillAdder) -> None:
    """The round's starting budgets, each candidate's prefix match and decision, then those never looked at."""
    if sched.policy.policy == "lpm":
        tracer.event("sched.queue_sorted", waiting=[r.rid for r in sched.waiting_queue])
    init = adder.initial
    tracer.event("sched.prefill_budget", available_size=init.available_size, evictable_size=init.evictable_size,
                 new_token_ratio=_num(init.new_token_ratio), running_rids=init.running_rids,
                 running_future_tokens=init.running_future_tokens, reserved_tokens=_num(init.reserved_tokens),
                 mixed_decode_rows=init.mixed_decode_rows, budgets=_budgets(init.budgets))
    by_rid = {r.rid: r for r in sched.waiting_queue + adder.can_run_list}
    for rec in adder.log:
        req = by_rid.get(rec.rid)
        if req is not None:
            tracer.event("sched.prefix_matched", rid=rec.rid, prefix_len=len(req.prefix_indices),
                         matched_slots=req.prefix_indices)
        facts = {k: v for k, v in (("extend_range", rec.extend_range), ("budget", rec.budget), ("need", rec.need))
                 if v is not None}
        tracer.event("sched.admission", rid=rec.rid, decision=rec.decision, **facts, source=rec.source,
                     before=_budgets(rec.before), after=_budgets(rec.after), extend_input_len=rec.extend_input_len,
                     future_tokens=rec.future_tokens, prefix_locked=rec.prefix_locked)
    looked_at = {rec.rid for rec in adder.log}
    not_considered = [r.rid for r in sched.waiting_queue if r.rid not in looked_at]
    if not_considered:
        last = adder.log[-1]
        tracer.event("sched.admission_stopped", not_considered=not_considered, stopped_by=last.rid,
                     decision=last.decision, budget=last.budget)


def batch_merged(last_batch: ScheduleBatch, dropped: list[Req], chunked_req: Req | None,
                 running_batch: ScheduleBatch) -> None:
    """last_batch's requests join running_batch at the start of a round: who joined, who was dropped and why."""
    tracer.event("sched.batch_merged", joined=[r.rid for r in last_batch.reqs],
                 finished=[r.rid for r in dropped if r.finished()],
                 chunked_excluded=chunked_req.rid if chunked_req is not None and chunked_req in dropped else None,
                 running=[r.rid for r in running_batch.reqs])


def decode_mem_checked(batch: ScheduleBatch, dropped: list[Req], where: str) -> None:
    """filter_batch, then check_decode_mem: one new KV slot per running request, from free or evictable ones."""
    pool, cache = batch.token_to_kv_pool, batch.tree_cache
    tracer.event("sched.decode_mem_checked", where=where, running=[r.rid for r in batch.reqs],
                 finished=[r.rid for r in dropped], needed=len(batch.reqs), available_size=pool.available_size(),
                 evictable_size=cache.evictable_size(), ok=batch.check_decode_mem())


def _budgets(budgets: dict) -> dict:
    return {k: _num(v) for k, v in budgets.items()}


def _num(x):
    """rem_total_tokens is a float (the reservation uses new_token_ratio): 4 decimals are plenty in a trace."""
    return round(x, 4) if isinstance(x, float) else x


def batch_formed(batch: ScheduleBatch) -> None:
    attrs = dict(type="ScheduleBatch", forward_mode=batch.forward_mode.name, seq_lens=batch.seq_lens,
                 prefix_lens=batch.prefix_lens, extend_lens=batch.extend_lens, out_cache_loc=batch.out_cache_loc,
                 req_pool_indices=batch.req_pool_indices, decoding_rids=[r.rid for r in batch.decoding_reqs])
    if tracer.level >= LEVEL_TOKENS:
        attrs["input_ids"] = batch.input_ids
    rids = [r.rid for r in batch.reqs]
    rows = batch.extend_lens if batch.forward_mode.is_extend() else [1] * len(rids)
    attrs["logit_rows"] = [end - 1 for end in itertools.accumulate(rows)]  # each request's last row is sampled
    tracer.event("sched.batch_formed", rids=rids, **attrs)
    # which rows (and so which KV slots) belong to which request
    start = 0
    for rid, n in zip(rids, rows):
        tracer.event("kv.assigned", rid=rid, slots=batch.out_cache_loc[start : start + n])
        start += n


def forward_begin(batch: ScheduleBatch, forward_batch) -> None:
    attrs = dict(type="ForwardBatch", forward_mode=batch.forward_mode.name, num_rows=len(batch.input_ids))
    if tracer.level >= LEVEL_TENSORS:
        attrs.update(positions=forward_batch.positions, input_ids=forward_batch.input_ids,
                     out_cache_loc=forward_batch.out_cache_loc)
    tracer.begin("model.forward", rids=[r.rid for r in batch.reqs], **attrs)


def forward_end(batch: ScheduleBatch, seconds: float) -> None:
    tracer.end("model.forward", rids=[r.rid for r in batch.reqs], duration_ms=round(seconds * 1000, 3))


def sampled(batch: ScheduleBatch, token_ids: list[int], logprobs: list[float], tokenizer) -> None:
    if tracer.level < LEVEL_TOKENS:
        return
    texts = [tokenizer.decode([t]) for t in token_ids]
    tracer.event("sched.sampled", rids=[r.rid for r in batch.reqs], type="GenerationBatchResult",
                 token_ids=token_ids, texts=texts, logprobs=[round(x, 5) for x in logprobs])


def output_appended(req: Req) -> None:
    if tracer.level >= LEVEL_TOKENS:
        reason = req.finished_reason.to_json() if req.finished() else None
        tracer.event("sched.output_appended", rid=req.rid, token_id=req.output_ids[-1],
                     output_len=len(req.output_ids), finished=req.finished(), finish_reason=reason)
    if req.finished():
        finished(req)


def finished(req: Req) -> None:
    tracer.event("sched.finished", rid=req.rid, finish_reason=req.finished_reason.to_json(),
                 output_len=len(req.output_ids), cached_tokens=req.cached_tokens)


def retracted(reqs: list[Req], queue_len: int) -> None:
    for req in reqs:
        tracer.event("sched.retracted", rid=req.rid, output_len=len(req.output_ids))
        tracer.event("sched.enqueued", rid=req.rid, queue_len=queue_len, retracted=True)


def round_end(sched: Scheduler) -> None:
    nodes = sched.tree_cache.tree_nodes()
    if nodes != sched._traced_tree:
        tracer.event("cache.tree", nodes=nodes)
        sched._traced_tree = nodes
    tracer.event(
        "sched.round_end",
        waiting=[r.rid for r in sched.waiting_queue],
        running=[r.rid for r in sched.running_batch.reqs],
        chunked=sched.chunked_req.rid if sched.chunked_req is not None else None,
        free_slots=sched.token_to_kv_pool.available_size(),
        cached_slots=sched.tree_cache.total_size(),
        evictable_slots=sched.tree_cache.evictable_size(),
    )
    tracer.flush()
