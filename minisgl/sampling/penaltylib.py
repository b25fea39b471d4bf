"""Penalties on a batch's logits before sampling (SGLang's sampling/penaltylib: a frequency, a presence, a
repetition and a min-new-tokens penalizer). Each request's penalty is computed from its own tokens, once per
round, on its own logits row; rows of requests without penalties are not touched.

    frequency_penalty    logit -= frequency_penalty * (times the token is in the output)
    presence_penalty     logit -= presence_penalty  (once, if the token is in the output)
    repetition_penalty   for every token of the prompt or the output: logit / penalty if positive, else
                         logit * penalty (as transformers' RepetitionPenaltyLogitsProcessor)
    min_new_tokens       the end-of-sequence and stop token ids are -inf until that many tokens are out
"""

from __future__ import annotations

import torch


def apply_penalties(logits: torch.Tensor, row_reqs: list) -> list[int]:
    """Penalize each row in place whose request asks; return those rows."""
    rows = []
    vocab = logits.shape[-1]
    for i, req in enumerate(row_reqs):
        params = req.sampling_params
        if not params.has_penalties:
            continue
        rows.append(i)
        row = logits[i]
        if len(req.output_ids) < params.min_new_tokens:
            stop = sorted(t for t in (req.eos_token_ids | params.stop_token_ids) if t < vocab)
            row[stop] = float("-inf")
        if (params.frequency_penalty or params.presence_penalty) and req.output_ids:
            counts = torch.bincount(torch.tensor(req.output_ids), minlength=vocab)[:vocab].to(row.dtype)
            row -= params.frequency_penalty * counts + params.presence_penalty * (counts > 0).to(row.dtype)
        if params.repetition_penalty != 1.0:
            seen = torch.tensor(sorted(set(req.origin_input_ids) | set(req.output_ids)))
            scores = row[seen]
            row[seen] = torch.where(scores > 0, scores / params.repetition_penalty,
                                    scores * params.repetition_penalty)
    return rows
