"""What SGLang keeps in managers/utils.py: GenerationBatchResult, what a round's forward gives back to the
scheduler, and validate_input_length, the check of a new prompt's length (with clamp_max_new_tokens, what
the scheduler does to an output that would not fit). A leaf module: the model workers make the result, the
scheduler's result processing and the trace collector read it, and none of them imports another for it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(kw_only=True)
class GenerationBatchResult:
    next_token_ids: list[int]  # one per request in the batch (speculative verify: one per row)
    logprobs: list[float]  # of each next token under the raw logits
    forward_time: float  # seconds spent in the model's forward
    # per request, its top_logprobs_num best; None if nobody asked
    top_logprobs_val: list[list[float]] | None = None
    top_logprobs_idx: list[list[int]] | None = None
    # speculative decoding (speculative/ngram_worker.py): per request, its draft tokens (its rows are its
    # last token's and one per draft) and how many of them were accepted; None in every other round
    draft_lens: list[int] | None = None
    accept_lens: list[int] | None = None
    # per request, the logprobs of the prompt tokens its rows scored this round (prompt logprobs asked for)
    input_token_logprobs: list[list[float]] | None = None
    input_top_logprobs_val: list[list[list[float]]] | None = None  # and at each, its top_logprobs_num best
    input_top_logprobs_idx: list[list[list[int]]] | None = None

    def rows_of(self, i: int) -> range:
        """The rows whose tokens request i takes: its one row, or its first accept_len + 1 rows."""
        if self.accept_lens is None:
            return range(i, i + 1)
        start = i + sum(self.draft_lens[:i])
        return range(start, start + 1 + self.accept_lens[i])


def validate_input_length(n: int, max_req_len: int, context_len: int, kv_slots: int) -> str | None:
    """Why a prompt of n tokens cannot run, or None: it needs at least one token, and room for one output
    token under max_req_len (the smaller of the context length and the KV cache's slots)."""
    if n == 0:
        return "the prompt is empty: at least one input token is needed"
    if n >= max_req_len:
        return (f"the prompt has {n} tokens, but at most {max_req_len - 1} fit: the limit is {max_req_len} "
                f"tokens (context length {context_len}, KV cache {kv_slots} slots) and one output token "
                "needs room")
    return None


def clamp_max_new_tokens(n: int, asked: int | None, max_req_len: int) -> int:
    """How many tokens a prompt of n tokens may produce: what was asked, or, where prompt and output would
    not fit max_req_len, what fits; no max_new_tokens (None) means "until the context is full"."""
    if asked is None or n + asked > max_req_len:
        return max_req_len - n
    return asked
