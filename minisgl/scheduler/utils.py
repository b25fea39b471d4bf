"""GenerationBatchResult: what a round's forward gives back to the scheduler (SGLang keeps it in
managers/utils.py). A leaf module: the model workers make it, the scheduler's result processing and the
trace collector read it, and none of them imports another for it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(kw_only=True)
class GenerationBatchResult:
    next_token_ids: list[int]  # one per request in the batch (TARGET_VERIFY: one per row)
    logprobs: list[float]  # of each next token under the raw logits
    forward_time: float  # seconds spent in the model's forward
    # per request, its top_logprobs_num best; None if nobody asked
    top_logprobs_val: list[list[float]] | None = None
    top_logprobs_idx: list[list[int]] | None = None
