"""Req: one request's long-lived state on the scheduler side, from arrival to finish."""

from __future__ import annotations

import torch

from minisgl.sampling.sampling_params import SamplingParams
from minisgl.scheduler.finish_reason import (
    FINISH_ABORT,
    FINISH_LENGTH,
    FINISH_MATCHED_STR,
    FINISH_MATCHED_TOKEN,
    BaseFinishReason,
)

_EMPTY = torch.empty(0, dtype=torch.int64)


class Req:
    def __init__(self, rid: str, origin_input_ids: list[int], sampling_params: SamplingParams,
                 eos_token_ids: set[int], *, stream: bool = False,
                 return_logprob: bool = False, top_logprobs_num: int = 0, logprob_start_len: int = -1,
                 bootstrap_host: str | None = None,
                 bootstrap_port: int | None = None, bootstrap_room: int | None = None,
                 http_worker_ipc: str | None = None):
        self.rid = rid
        self.http_worker_ipc = http_worker_ipc  # where its outputs go (--tokenizer-worker-num; io_struct.py)
        self.origin_input_ids = origin_input_ids
        self.sampling_params = sampling_params
        self.eos_token_ids = eos_token_ids
        self.stream = stream
        self.output_ids: list[int] = []
        self.output_logprobs: list[float] = []  # of each output token, under the raw logits
        self.return_logprob = return_logprob  # whether they go back to the client
        self.top_logprobs_num = top_logprobs_num
        # the prompt's logprobs (SGLang's input_token_logprobs): from token logprob_start_len (>= 1: token 0
        # has no logprob), collected chunk by chunk while the prompt is prefilled; -1: not asked for
        self.logprob_start_len = logprob_start_len
        self.input_token_logprobs: list[float] = []
        self.input_top_logprobs_val: list[list[float]] = []  # per scored prompt token, when top_logprobs_num
        self.input_top_logprobs_idx: list[list[int]] = []
        self.output_top_logprobs_val: list[list[float]] = []  # per output token, when top_logprobs_num > 0
        self.output_top_logprobs_idx: list[list[int]] = []

        # this round: tokens whose KV exists once it runs, what is already cached, what is new
        self.fill_ids: list[int] = []
        self.prefix_indices: torch.Tensor = _EMPTY  # KV slots of the cached prefix
        self.last_node = None  # radix-tree node holding the end of that prefix (locked while running)
        self.extend_input_len = 0
        self.req_pool_idx: int | None = None

        self.finished_reason: BaseFinishReason | None = None
        self.to_abort = False
        self.is_retracted = False
        self.is_chunked = 0  # > 0 while the prompt is being prefilled in chunks
        self.cached_tokens = 0  # prompt tokens served from the radix cache (reported in usage)
        self.send_token_offset = 0  # output tokens already sent to the detokenizer
        # overlap loop: placeholders (-k, FutureMap index k) of tokens launched rounds are sampling,
        # oldest first
        self.future_token_ids: list[int] = []
        # NGRAM speculation: the most draft tokens this request proposes next round (None until its first
        # proposal; speculative/ngram_worker.py grows it while its drafts are accepted)
        self.spec_draft_limit: int | None = None
        # structured output (constrained/): the matcher of the request's json_schema, regex or ebnf, once
        # compiled; its mask is applied to the request's logits row, and every kept token advances it
        self.grammar = None
        # prefill/decode disaggregation (minisgl/disaggregation/): the prefill server's bootstrap address, and
        # the room, the number the router gave both halves of this request so they find each other
        self.bootstrap_host, self.bootstrap_port, self.bootstrap_room = (
            bootstrap_host, bootstrap_port, bootstrap_room)
        self.disagg_wait_start = 0.0  # when it entered its PD queue (a peer that never answers times out)

    # ---- admission --------------------------------------------------------------------------------
    def init_next_round_input(self, tree_cache=None) -> None:
        """Refresh fill_ids and, given a cache, look up the longest cached prefix.

        The match stops one token short of fill_ids: the last position must run through the model
        again, because its logits pick the next token.
        """
        self.fill_ids = self.origin_input_ids + self.output_ids
        if tree_cache is not None:
            # the prompt's logprobs need every prompt row's logits: such a prompt matches nothing
            key = [] if self.needs_input_logprobs() else self.fill_ids[: len(self.fill_ids) - 1]
            match = tree_cache.match_prefix(key)
            self.prefix_indices, self.last_node = match.device_indices, match.last_node
        self.extend_input_len = len(self.fill_ids) - len(self.prefix_indices)

    def set_extend_range(self, start: int, end: int) -> None:
        """This round computes fill_ids[start:end]; [0:start) is already in the KV cache."""
        assert start == len(self.prefix_indices), (start, len(self.prefix_indices))
        self.fill_ids = self.fill_ids[:end]
        self.extend_input_len = end - start

    def needs_input_logprobs(self) -> bool:
        """The prompt's logprobs are asked for and not all computed yet: every prompt row runs."""
        return self.logprob_start_len >= 0 and not self.output_ids and not self.is_retracted

    def input_logprob_positions(self, start: int, end: int) -> range:
        """Of the prompt rows [start, end) this round computes, the ones whose logits score a prompt token:
        row p scores token p + 1, for tokens max(logprob_start_len, 1) .. input_len - 1."""
        first = max(self.logprob_start_len, 1) - 1
        return range(max(start, first), min(end, len(self.origin_input_ids) - 1))

    @property
    def seqlen(self) -> int:
        """Tokens so far, counting those a launched round is still sampling (overlap loop)."""
        return len(self.origin_input_ids) + len(self.output_ids) + len(self.future_token_ids)

    def last_token_id(self) -> int:
        """The token the next decode row feeds: the newest output, or the placeholder of one not sampled
        yet."""
        return (self.future_token_ids or self.output_ids)[-1]

    # ---- finish -----------------------------------------------------------------------------------
    def finished(self) -> bool:
        return self.finished_reason is not None

    def check_finished(self, tokenizer=None) -> None:
        if self.finished():
            return
        if self.to_abort:
            self.finished_reason = FINISH_ABORT()
            return
        params = self.sampling_params
        last = self.output_ids[-1]
        if self.grammar is not None and self.grammar.is_terminated():  # the grammar took its stop token
            self.finished_reason = FINISH_MATCHED_TOKEN(last)
        elif last in params.stop_token_ids or (not params.ignore_eos and last in self.eos_token_ids):
            self.finished_reason = FINISH_MATCHED_TOKEN(last)
        elif params.stop_strs and tokenizer is not None and (hit := self._matched_stop_str(tokenizer)):
            self.finished_reason = FINISH_MATCHED_STR(hit)
        elif len(self.output_ids) >= params.max_new_tokens:
            self.finished_reason = FINISH_LENGTH(params.max_new_tokens)

    def _matched_stop_str(self, tokenizer) -> str | None:
        # a stop string can only have been completed by the newest token: decode just the tail
        longest = max(len(s) for s in self.sampling_params.stop_strs)
        tail = tokenizer.decode(self.output_ids[-(longest + 1):])
        return next((s for s in self.sampling_params.stop_strs if s in tail), None)

    def reset_for_retract(self) -> None:
        self.prefix_indices, self.last_node = _EMPTY, None
        self.fill_ids, self.extend_input_len = [], 0
        self.req_pool_idx = None
        self.is_retracted = True

    def __repr__(self) -> str:
        return f"Req(rid={self.rid}, input={len(self.origin_input_ids)}, output={len(self.output_ids)})"
