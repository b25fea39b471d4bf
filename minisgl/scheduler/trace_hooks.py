"""The scheduler's trace events, kept out of scheduler.py so that file reads like the algorithm.

Each function is called behind `if tracer.enabled:`, so none of this runs when tracing is off.
Event names and fields: lessons/docs/reference/trace-events.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracer.api import LEVEL_TENSORS, LEVEL_TOKENS, tracer

if TYPE_CHECKING:
    from minisgl.scheduler.req import Req
    from minisgl.scheduler.schedule_batch import ScheduleBatch
    from minisgl.scheduler.scheduler import Scheduler


def req_created(req: Req, queue_len: int) -> None:
    tracer.event("sched.req_created", rid=req.rid, type="Req", input_len=len(req.origin_input_ids),
                 sampling_params=req.sampling_params.to_dict())
    tracer.event("sched.enqueued", rid=req.rid, queue_len=queue_len, retracted=False)


def admission(candidates: list[Req], log: list[tuple[str, str, dict]]) -> None:
    by_rid = {r.rid: r for r in candidates}
    for rid, decision, facts in log:
        req = by_rid.get(rid)
        if req is not None:
            tracer.event("sched.prefix_matched", rid=rid, prefix_len=len(req.prefix_indices),
                         matched_slots=req.prefix_indices)
        tracer.event("sched.admission", rid=rid, decision=decision, **facts)


def batch_formed(batch: ScheduleBatch) -> None:
    attrs = dict(type="ScheduleBatch", forward_mode=batch.forward_mode.name, seq_lens=batch.seq_lens,
                 prefix_lens=batch.prefix_lens, extend_lens=batch.extend_lens, out_cache_loc=batch.out_cache_loc,
                 req_pool_indices=batch.req_pool_indices, decoding_rids=[r.rid for r in batch.decoding_reqs])
    if tracer.level >= LEVEL_TOKENS:
        attrs["input_ids"] = batch.input_ids
    rids = [r.rid for r in batch.reqs]
    tracer.event("sched.batch_formed", rids=rids, **attrs)
    # which rows (and so which KV slots) belong to which request
    start = 0
    rows = batch.extend_lens if batch.forward_mode.is_extend() else [1] * len(rids)
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
