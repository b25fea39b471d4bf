"""TpModelWorker: turns the scheduler's ScheduleBatch into a ForwardBatch, runs it and samples.

With --tp-size N this is rank 0's worker: the ModelRunner's forward runs on every rank
(minisgl/distributed/), and the sampled tokens are rank 0's.
"""

from __future__ import annotations

import time

import torch

from minisgl.layers.logprobs import get_top_logprobs
from minisgl.layers.sampler import Sampler
from minisgl.model_executor.forward_batch_info import ForwardBatch
from minisgl.model_executor.model_runner import ModelRunner
from minisgl.sampling.penaltylib import apply_penalties
from minisgl.scheduler.schedule_batch import ScheduleBatch
from minisgl.scheduler.trace_collector import SchedulerTraceCollector
from minisgl.scheduler.utils import GenerationBatchResult


class TpModelWorker:
    def __init__(self, model_runner: ModelRunner, trace_collector: SchedulerTraceCollector,
                 random_seed: int = 0, grammar_backend=None):
        self.model_runner = model_runner
        self.grammar_backend = grammar_backend  # structured output: masks the rows of requests with a grammar
        self.trace_collector = trace_collector  # the scheduler's: it sees the forward begin and end
        self.sampler = Sampler(random_seed=random_seed)
        self.sampler.use_kernel = model_runner.use_cpu_kernels

    def forward_batch_generation(self, batch: ScheduleBatch) -> GenerationBatchResult:
        """Record the batch as it runs (the trace's sched.batch_formed), then forward and sample it."""
        self.trace_collector.batch_formed(batch)
        return self.forward_and_sample(batch)

    def forward_and_sample(self, batch: ScheduleBatch) -> GenerationBatchResult:
        """(The overlap loop's forward thread calls this: its scheduler thread recorded the batch.)"""
        forward_batch = ForwardBatch.init_new(batch, self.model_runner)
        scored = input_logprob_rows(batch, forward_batch)
        forward_batch.input_logprob_rows = [row for row, _, _ in scored] or None
        self.trace_collector.forward_begin(batch, forward_batch)
        t0 = time.perf_counter()
        logits = self.model_runner.forward(forward_batch)
        forward_time = time.perf_counter() - t0
        self.trace_collector.forward_end(batch, forward_time)
        # one logits row per request; TARGET_VERIFY: one per verified row, each request's rows in turn
        if getattr(batch, "spec_info", None) is not None:
            row_reqs, output_lens = batch.spec_info.rows(batch.reqs)
        else:
            # (the overlap loop launches a copy: its requests' output lengths at launch seed the sampling)
            row_reqs, output_lens = (
                batch.reqs, batch.sampling_steps or [len(r.output_ids) for r in batch.reqs])
        params = [r.sampling_params for r in row_reqs]
        result = GenerationBatchResult(next_token_ids=[], logprobs=[], forward_time=forward_time)
        with torch.inference_mode():
            if any(r.grammar is not None or r.sampling_params.has_penalties for r in row_reqs):
                # a copy: the runner may reuse its logits buffer
                logits = logits.to(torch.float32, copy=True)
                apply_penalties(logits, row_reqs)  # SGLang's penalizers, then the grammar's mask
                if any(r.grammar is not None for r in row_reqs):
                    self.apply_grammar_masks(logits, row_reqs)
            top_nums = [r.top_logprobs_num for r in row_reqs]
            if any(top_nums):  # only for requests that ask, from the same raw logits the sampler reads
                result.top_logprobs_val, result.top_logprobs_idx = get_top_logprobs(logits, top_nums)
            next_ids, logprobs = self.sampler(logits, params, output_lens)
        result.next_token_ids, result.logprobs = next_ids.tolist(), logprobs.tolist()
        if scored:
            (result.input_token_logprobs, result.input_top_logprobs_val,
             result.input_top_logprobs_idx) = input_token_logprobs(batch, scored, forward_batch.input_logits)
        return result

    def apply_grammar_masks(self, logits: torch.Tensor, row_reqs: list) -> None:
        """Each grammar row's next-token mask applied to its logits: disallowed tokens become -inf, so the
        sampler, greedy or not, picks among what the grammar allows (SGLang: the sampling info's vocab
        mask). The logprobs are then those of the masked row."""
        rows = [i for i, r in enumerate(row_reqs) if r.grammar is not None]
        vocab_mask = self.grammar_backend.allocate_vocab_mask(len(row_reqs))
        for i in rows:
            row_reqs[i].grammar.fill_vocab_mask(vocab_mask, i)
        self.grammar_backend.apply_vocab_mask(logits, vocab_mask, rows)
        # (the collector counts each row's allowed tokens only when tracing is on)
        self.trace_collector.grammar_masked([row_reqs[i] for i in rows], self.grammar_backend, vocab_mask,
                                            rows)


def input_logprob_rows(batch: ScheduleBatch, forward_batch: ForwardBatch) -> list[tuple[int, int, int]]:
    """(row, request index, the prompt token the row scores) for every prompt row whose logits a request's
    prompt logprobs need this round (EXTEND and MIXED batches; none otherwise)."""
    if forward_batch.extend_start_loc is None or not any(r.needs_input_logprobs() for r in batch.reqs):
        return []
    scored = []
    for i, req in enumerate(batch.reqs):
        if not req.needs_input_logprobs():
            continue
        start, first_row = forward_batch.extend_prefix_lens[i], forward_batch.extend_start_loc[i]
        for p in req.input_logprob_positions(start, start + forward_batch.extend_seq_lens[i]):
            scored.append((first_row + p - start, i, req.origin_input_ids[p + 1]))
    return scored


def input_token_logprobs(batch: ScheduleBatch, scored: list[tuple[int, int, int]], input_logits: torch.Tensor
                         ) -> tuple[list[list[float]], list[list[list[float]]], list[list[list[int]]]]:
    """Per request of the batch: the log-probabilities of the prompt tokens its rows scored, in order, and at
    each of those rows its top_logprobs_num best (values, token ids)."""
    logprobs = torch.log_softmax(input_logits.float(), dim=-1)
    tokens = torch.tensor([token for _, _, token in scored])
    values = logprobs[torch.arange(len(scored)), tokens].tolist()
    top_vals, top_idxs = get_top_logprobs(logprobs, [batch.reqs[i].top_logprobs_num for _, i, _ in scored])
    per_req: list[list[float]] = [[] for _ in batch.reqs]
    tops_val: list[list[list[float]]] = [[] for _ in batch.reqs]
    tops_idx: list[list[list[int]]] = [[] for _ in batch.reqs]
    for (_, i, _), value, tv, ti in zip(scored, values, top_vals, top_idxs):
        per_req[i].append(value)
        tops_val[i].append(tv)
        tops_idx[i].append(ti)
    return per_req, tops_val, tops_idx
