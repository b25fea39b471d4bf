"""The most likely tokens at each sampled position, for requests that ask (SGLang's top_logprobs_num).

Like the chosen token's log-probability the sampler returns, they are log_softmax of the raw logits: before
temperature, top-k, top-p or min-p, which change how a token is drawn, not the logprobs reported (OpenAI
and SGLang report them the same way).
"""

from __future__ import annotations

import torch


def get_top_logprobs(logits: torch.Tensor, top_logprobs_nums: list[int]
                     ) -> tuple[list[list[float]], list[list[int]]]:
    """Per row: the top_logprobs_nums[i] best (logprob, token id) pairs, best first; empty lists for 0."""
    vals: list[list[float]] = [[] for _ in top_logprobs_nums]
    idxs: list[list[int]] = [[] for _ in top_logprobs_nums]
    rows = [i for i, k in enumerate(top_logprobs_nums) if k > 0]
    if not rows:
        return vals, idxs
    k = max(top_logprobs_nums[i] for i in rows)
    logprobs = torch.log_softmax(logits[rows].float(), dim=-1)
    top_vals, top_idxs = logprobs.topk(min(k, logprobs.shape[-1]), dim=-1)  # sorted, best first
    for j, i in enumerate(rows):
        n = top_logprobs_nums[i]
        vals[i], idxs[i] = top_vals[j, :n].tolist(), top_idxs[j, :n].tolist()
    return vals, idxs
