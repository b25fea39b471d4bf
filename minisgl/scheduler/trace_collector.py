"""SchedulerTraceCollector: every trace event of the scheduler process comes from here.

The scheduler calls it at the fixed points of its loop (round begun, a request received, admission
done, batch formed, forward begun and ended, results processed, round end). Each hook reads the
scheduler's state and the decisions its components returned (the PrefillAdder's log, the requests
filter_batch dropped, the CacheManager's journal of KV moves) and turns them into events. The
components themselves know nothing about tracing.

Every hook does nothing while tracing is off, so call sites need no guard of their own. Otherwise a
hook first reports the KV moves made since the previous hook (kv.alloc, kv.free, cache.inserted,
cache.evicted), so the trace keeps the order in which things happened. Events: reference/trace-events.md.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

from minisgl.distributed.communication_op import comm_stats
from minisgl.distributed.parallel_state import get_tensor_model_parallel_world_size
from minisgl.scheduler.trace_hook import Scheduler, hook
from tracer.api import LEVEL_TENSORS, LEVEL_TOKENS, tracer

if TYPE_CHECKING:
    from minisgl.scheduler.req import Req
    from minisgl.scheduler.schedule_batch import ScheduleBatch
    from minisgl.scheduler.schedule_policy import PrefillAdder
    from minisgl.scheduler.utils import GenerationBatchResult


class SchedulerTraceCollector:
    def __init__(self, sched: Scheduler):
        self.sched = sched
        self._traced_tree: list[dict] | None = None  # the tree as last emitted: cache.tree only on a change
        self._result_round: int | None = None  # overlap loop: the round whose result is being processed
        self._texts: dict[int, str] = {}  # each token's text, decoded once (at most the vocabulary)
        self._output_lens: list[int] = []  # speculative round: each request's output length before it
        if not tracer.enabled:
            return
        sched.cache_manager.journal = []
        a, gemm_rows = sched.server_args, sched.model_runner.dequant_gemm_rows
        tracer.event("sched.config", kv_size=sched.token_to_kv_pool.size,
                     max_running_requests=a.max_running_requests, max_prefill_tokens=a.max_prefill_tokens,
                     chunked_prefill_size=a.chunked_prefill_size, schedule_policy=sched.policy.policy,
                     disable_radix_cache=a.disable_radix_cache, enable_mixed_chunk=a.enable_mixed_chunk,
                     **({"overlap_schedule": True} if a.overlap_schedule() else {}),
                     **({"dequant_gemm_rows": gemm_rows} if gemm_rows else {}))

    def _report_cache_ops(self) -> None:
        journal = self.sched.cache_manager.journal
        if not journal:
            return
        self.sched.cache_manager.journal = []
        for op in journal:
            if op.kind == "alloc":
                tracer.event("kv.alloc", slots=op.slots)
            elif op.kind == "free":
                tracer.event("kv.free", slots=op.slots, reason=op.reason)
            elif op.kind == "insert":
                tracer.event("cache.inserted", rid=op.rid, slots=op.slots)
            else:
                tracer.event("cache.evicted", slots=op.slots)

    # ---- a round begins; requests arrive --------------------------------------------------------
    @hook
    def round_begin(self) -> None:
        tracer.round = self.sched.forward_ct + 1  # events from here on belong to the next batch that runs

    @hook
    def req_created(self, req: Req, asked_max_new_tokens: int | None) -> None:
        attrs = {}
        if asked_max_new_tokens is not None and asked_max_new_tokens != req.sampling_params.max_new_tokens:
            attrs["max_new_tokens_clamped"] = {"from": asked_max_new_tokens,
                                               "to": req.sampling_params.max_new_tokens}
        tracer.event("sched.req_created", rid=req.rid, type="Req", input_len=len(req.origin_input_ids),
                     sampling_params=req.sampling_params.to_dict(), **attrs)
        waiting = self.sched.waiting_queue
        if waiting and waiting[-1] is req:
            tracer.event("sched.enqueued", rid=req.rid, queue_len=len(waiting), retracted=False)
        elif self.sched.disaggregation_mode.value == "null":  # its grammar compiles: enqueued next round
            tracer.event("sched.grammar_queued", rid=req.rid, kind=req.sampling_params.grammar_key()[0])
        else:  # --disaggregation-mode: the prefill's bootstrap queue or the decode's prealloc queue first
            self.sched.disagg_trace.queued(
                req, "bootstrap" if self.sched.disaggregation_mode.value == "prefill" else "prealloc")

    @hook
    def grammar_ready(self, req: Req, kind: str, cached: bool) -> None:
        tracer.event("sched.grammar_ready", rid=req.rid, kind=kind, cached=cached)
        if not cached:  # it waited a round for the compile, and has just joined the waiting queue
            tracer.event("sched.enqueued", rid=req.rid, queue_len=len(self.sched.waiting_queue),
                         retracted=False)

    @hook
    def grammar_masked(self, reqs: list[Req], backend, vocab_mask, rows: list[int]) -> None:
        tracer.event("sched.grammar_masked", rids=[r.rid for r in reqs], allowed=backend.allowed_counts(
            vocab_mask, rows))

    @hook
    def req_refused(self, req: Req, message: str) -> None:
        tracer.event("sched.refused", rid=req.rid, message=message)

    @hook
    def abort_requested(self, req: Req, where: str) -> None:
        tracer.event("sched.abort_requested", rid=req.rid, where=where)

    @hook
    def cache_flushed(self) -> None:  # the flush's kv.free events: the pending KV moves the guard reports
        pass

    # ---- choosing the batch ---------------------------------------------------------------------
    @hook
    def batch_merged(self, dropped: list[Req]) -> None:
        """last_batch's requests join running_batch at a round's start: who joined, who was dropped, why."""
        s = self.sched
        tracer.event("sched.batch_merged", joined=[r.rid for r in s.last_batch.reqs],
                     finished=[r.rid for r in dropped if r.finished()],
                     chunked_excluded=s.chunked_req.rid
                     if s.chunked_req is not None and s.chunked_req in dropped else None,
                     running=[r.rid for r in s.running_batch.reqs])

    @hook
    def prefill_skipped(self, running: list[Req]) -> None:
        """get_new_batch_prefill returned before building a PrefillAdder: no request slot is left."""
        s = self.sched
        if s.waiting_queue:
            tracer.event("sched.prefill_skipped", reason="max_running_requests", num_running=len(running),
                         max_running_requests=s.server_args.max_running_requests,
                         waiting=[r.rid for r in s.waiting_queue])

    @hook
    def admission_done(self, adder: PrefillAdder) -> None:
        """The round's starting budgets, each candidate's prefix match and decision, then those never
        looked at."""
        s = self.sched
        if s.policy.policy == "lpm":
            tracer.event("sched.queue_sorted", waiting=[r.rid for r in s.waiting_queue])
        init = adder.initial
        tracer.event("sched.prefill_budget", available_size=init.available_size,
                     evictable_size=init.evictable_size, new_token_ratio=_num(init.new_token_ratio),
                     running_rids=init.running_rids, running_future_tokens=init.running_future_tokens,
                     reserved_tokens=_num(init.reserved_tokens), mixed_decode_rows=init.mixed_decode_rows,
                     budgets=_budgets(init.budgets))
        by_rid = {r.rid: r for r in s.waiting_queue + adder.can_run_list}
        for rec in adder.log:
            req = by_rid.get(rec.rid)
            if req is not None:
                tracer.event("sched.prefix_matched", rid=rec.rid, prefix_len=len(req.prefix_indices),
                             matched_slots=req.prefix_indices)
            facts = {k: v for k, v in (("extend_range", rec.extend_range), ("budget", rec.budget),
                                       ("need", rec.need)) if v is not None}
            tracer.event("sched.admission", rid=rec.rid, decision=rec.decision, **facts, source=rec.source,
                         before=_budgets(rec.before), after=_budgets(rec.after),
                         extend_input_len=rec.extend_input_len, future_tokens=rec.future_tokens,
                         prefix_locked=rec.prefix_locked)
        looked_at = {rec.rid for rec in adder.log}
        not_considered = [r.rid for r in s.waiting_queue if r.rid not in looked_at]
        if not_considered:
            last = adder.log[-1]
            tracer.event("sched.admission_stopped", not_considered=not_considered, stopped_by=last.rid,
                         decision=last.decision, budget=last.budget)

    @hook
    def decode_mem_checked(self, batch: ScheduleBatch, dropped: list[Req], where: str) -> None:
        """filter_batch, then check_decode_mem: one new KV slot per running request, from free or
        evictable ones."""
        s = self.sched
        tracer.event("sched.decode_mem_checked", where=where, running=[r.rid for r in batch.reqs],
                     finished=[r.rid for r in dropped], needed=len(batch.reqs),
                     available_size=s.token_to_kv_pool.available_size(),
                     evictable_size=s.tree_cache.evictable_size(), ok=batch.check_decode_mem())

    @hook
    def retracted(self, reqs: list[Req]) -> None:
        for req in reqs:
            tracer.event("sched.retracted", rid=req.rid, output_len=len(req.output_ids))
            tracer.event("sched.enqueued", rid=req.rid, queue_len=len(self.sched.waiting_queue),
                         retracted=True)

    @hook
    def batch_formed(self, batch: ScheduleBatch) -> None:
        attrs = dict(type="ScheduleBatch", forward_mode=batch.forward_mode.name, seq_lens=batch.seq_lens,
                     prefix_lens=batch.prefix_lens, extend_lens=batch.extend_lens,
                     out_cache_loc=batch.out_cache_loc, req_pool_indices=batch.req_pool_indices,
                     decoding_rids=[r.rid for r in batch.decoding_reqs])
        if tracer.level >= LEVEL_TOKENS:
            attrs["input_ids"] = batch.input_ids
        rids = [r.rid for r in batch.reqs]
        rows = batch.extend_lens if batch.forward_mode.has_extend_rows() else [1] * len(rids)
        if batch.spec_info is not None:  # TARGET_VERIFY: every row is scored; rows after the first are drafts
            attrs["logit_rows"] = list(range(sum(rows)))
            attrs["draft_lens"] = [len(d) for d in batch.spec_info.draft_tokens]
        else:
            # each request's last row is sampled
            attrs["logit_rows"] = [end - 1 for end in itertools.accumulate(rows)]
        tracer.event("sched.batch_formed", rids=rids, **attrs)
        # which rows (and so which KV slots) belong to which request
        start = 0
        for rid, n in zip(rids, rows):
            tracer.event("kv.assigned", rid=rid, slots=batch.out_cache_loc[start : start + n])
            start += n

    # ---- running it -----------------------------------------------------------------------------
    @hook
    def forward_begin(self, batch: ScheduleBatch, forward_batch) -> None:
        attrs = dict(type="ForwardBatch", forward_mode=batch.forward_mode.name, num_rows=len(batch.input_ids))
        if tracer.level >= LEVEL_TENSORS:
            attrs.update(positions=forward_batch.positions, input_ids=forward_batch.input_ids,
                         out_cache_loc=forward_batch.out_cache_loc)
        tracer.begin("model.forward", rids=[r.rid for r in batch.reqs], **attrs)

    @hook
    def forward_end(self, batch: ScheduleBatch, seconds: float) -> None:
        rids, duration_ms = [r.rid for r in batch.reqs], round(seconds * 1000, 3)
        tp_size = get_tensor_model_parallel_world_size()
        if tp_size == 1:
            tracer.end("model.forward", rids=rids, duration_ms=duration_ms)
            return
        comm = comm_stats.take()  # with --tp-size > 1: the forward's collectives, summed
        tracer.end("model.forward", rids=rids, duration_ms=duration_ms, tp_size=tp_size,
                   all_reduce=comm.all_reduce, all_gather=comm.all_gather, comm_ms=comm.comm_ms)

    # ---- its results ----------------------------------------------------------------------------
    def result_of_round(self, round_: int) -> None:
        """Overlap loop: the result about to be processed is that round's (sched.sampled says so)."""
        self._result_round = round_

    @hook
    def sampled(self, batch: ScheduleBatch, result: GenerationBatchResult) -> None:
        if result.accept_lens is not None:  # speculative: what each request had before its accepted tokens
            self._output_lens = [len(r.output_ids) for r in batch.reqs]
        if tracer.level < LEVEL_TOKENS:
            return
        texts = [self._text(t) for t in result.next_token_ids]
        # speculative verify: tokens per rid (its last token's row and one per draft)
        attrs = {} if result.draft_lens is None else {"rows": [1 + d for d in result.draft_lens]}
        if self._result_round is not None:  # overlap loop: the round whose batch sampled these
            attrs["batch_round"] = self._result_round
        tracer.event("sched.sampled", rids=[r.rid for r in batch.reqs], type="GenerationBatchResult",
                     token_ids=result.next_token_ids, texts=texts,
                     logprobs=[round(x, 5) for x in result.logprobs], **attrs)

    @hook
    def output_appended(self, req: Req) -> None:
        if tracer.level >= LEVEL_TOKENS:
            reason = req.finished_reason.to_json() if req.finished() else None
            tracer.event("sched.output_appended", rid=req.rid, token_id=req.output_ids[-1],
                         output_len=len(req.output_ids), finished=req.finished(), finish_reason=reason)
        if req.finished():
            self._finished(req)

    @hook
    def req_finished(self, req: Req) -> None:
        """A request that finished without a token (aborted while waiting)."""
        self._finished(req)

    @hook
    def results_processed(self, batch: ScheduleBatch | None = None,
                          result: GenerationBatchResult | None = None) -> None:
        """Tokens appended and KV cached: the cache's moves (pending, so reported by the guard) precede
        the output. A speculative round's outcome per request follows them (its rejected rows' KV went
        back before sched.sampled: kv.free, reason rejected)."""
        if result is None or result.accept_lens is None:
            return
        appended = [len(r.output_ids) - n for r, n in zip(batch.reqs, self._output_lens)]
        tracer.event("sched.spec_verified", rids=[r.rid for r in batch.reqs], draft_lens=result.draft_lens,
                     verified_rows=[1 + d for d in result.draft_lens], accepted_lens=result.accept_lens,
                     appended_lens=appended)

    @hook
    def round_end(self) -> None:
        s = self.sched
        nodes = s.tree_cache.tree_nodes()
        if nodes != self._traced_tree:
            tracer.event("cache.tree", nodes=nodes)
            self._traced_tree = nodes
        tracer.event("sched.round_end", waiting=[r.rid for r in s.waiting_queue],
                     running=[r.rid for r in s.running_batch.reqs],
                     chunked=s.chunked_req.rid if s.chunked_req is not None else None,
                     free_slots=s.token_to_kv_pool.available_size(), cached_slots=s.tree_cache.total_size(),
                     evictable_slots=s.tree_cache.evictable_size())
        tracer.flush()

    def _text(self, token_id: int) -> str:
        text = self._texts.get(token_id)
        if text is None:
            text = self._texts[token_id] = self.sched.tokenizer.decode([token_id])
        return text

    def _finished(self, req: Req) -> None:
        tracer.event("sched.finished", rid=req.rid, finish_reason=req.finished_reason.to_json(),
                     output_len=len(req.output_ids), cached_tokens=req.cached_tokens)


def _budgets(budgets: dict) -> dict:
    return {k: _num(v) for k, v in budgets.items()}


def _num(x):
    """rem_total_tokens is a float (the reservation uses new_token_ratio): 4 decimals are plenty."""
    return round(x, 4) if isinstance(x, float) else x
