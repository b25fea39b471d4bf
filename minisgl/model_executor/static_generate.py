"""Greedy generation for a fixed set of prompts, with no scheduler: one EXTEND, then DECODE rounds.

The smallest loop that drives ForwardBatch over the paged KV cache. The Scheduler does the same
bookkeeping, plus admission, prefix reuse, chunking and retraction. Used by tests and benchmarks.
"""

from __future__ import annotations

import torch

from minisgl.model_executor.forward_batch_info import ForwardBatch, ForwardMode, compute_positions
from minisgl.model_executor.model_runner import ModelRunner


def _forward_batch(runner: ModelRunner, mode, input_ids, out_cache_loc, req_pool_indices, seq_lens,
                   prefix_lens=None):
    extend_lens = [s - p for s, p in zip(seq_lens, prefix_lens)] if mode.is_extend() else None
    fb = ForwardBatch(
        forward_mode=mode,
        batch_size=len(seq_lens),
        input_ids=torch.tensor(input_ids, dtype=torch.int64),
        positions=compute_positions(mode, seq_lens, prefix_lens),
        out_cache_loc=out_cache_loc,
        req_pool_indices=torch.tensor(req_pool_indices, dtype=torch.int64),
        seq_lens=torch.tensor(seq_lens, dtype=torch.int64),
        seq_lens_cpu=list(seq_lens),
        req_to_token_pool=runner.req_to_token_pool,
        token_to_kv_pool=runner.token_to_kv_pool,
        extend_prefix_lens=prefix_lens,
        extend_seq_lens=extend_lens,
    )
    if extend_lens is not None:
        fb.extend_start_loc = [sum(extend_lens[:i]) for i in range(len(extend_lens))]
    return fb


def extend(runner: ModelRunner, req_pool_indices: list[int], token_ids: list[list[int]],
           prefix_lens: list[int]):
    """Run tokens [prefix_len:] of each request (its first prefix_len tokens must already be cached)."""
    seq_lens = [len(t) for t in token_ids]
    new_ids = [tok for t, p in zip(token_ids, prefix_lens) for tok in t[p:]]
    out_cache_loc = runner.token_to_kv_pool.alloc(len(new_ids))
    pos = 0
    for idx, p, s in zip(req_pool_indices, prefix_lens, seq_lens):
        runner.req_to_token_pool.req_to_token[idx, p:s] = out_cache_loc[pos : pos + s - p]
        pos += s - p
    fb = _forward_batch(runner, ForwardMode.EXTEND, new_ids, out_cache_loc, req_pool_indices, seq_lens,
                        prefix_lens)
    return runner.forward(fb), out_cache_loc


def decode(runner: ModelRunner, req_pool_indices: list[int], last_ids: list[int], seq_lens: list[int]):
    """One DECODE round: each request's newest token at position seq_len - 1."""
    out_cache_loc = runner.token_to_kv_pool.alloc(len(last_ids))
    for i, (idx, s) in enumerate(zip(req_pool_indices, seq_lens)):
        runner.req_to_token_pool.req_to_token[idx, s - 1] = out_cache_loc[i]
    fb = _forward_batch(runner, ForwardMode.DECODE, last_ids, out_cache_loc, req_pool_indices, seq_lens)
    return runner.forward(fb), out_cache_loc


def greedy_generate(
    runner: ModelRunner, prompts: list[list[int]], max_new_tokens: int, eos_token_ids: list[int] | None = None
) -> list[list[int]]:
    """All prompts in one EXTEND, then batched DECODE until every request has hit EOS (or
    max_new_tokens). Outputs are cut after their first EOS. Frees everything it took."""
    eos = set(eos_token_ids or ())
    idxs = runner.req_to_token_pool.alloc(len(prompts))
    taken: list[torch.Tensor] = []
    try:
        logits, loc = extend(runner, idxs, prompts, [0] * len(prompts))
        taken.append(loc)
        outputs = [[t] for t in runner.sample_greedy(logits).tolist()]
        seq_lens = [len(p) for p in prompts]
        for _ in range(max_new_tokens - 1):
            if eos and all(eos.intersection(o) for o in outputs):
                break
            seq_lens = [s + 1 for s in seq_lens]
            logits, loc = decode(runner, idxs, [o[-1] for o in outputs], seq_lens)
            taken.append(loc)
            for o, t in zip(outputs, runner.sample_greedy(logits).tolist()):
                o.append(t)
        return [_cut_after_eos(o, eos) for o in outputs]
    finally:
        if taken:
            runner.token_to_kv_pool.free(torch.cat(taken))
        runner.req_to_token_pool.free(idxs)


def _cut_after_eos(output: list[int], eos: set[int]) -> list[int]:
    for i, t in enumerate(output):
        if t in eos:
            return output[: i + 1]
    return output
