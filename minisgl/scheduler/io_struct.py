"""Messages between the processes. Plain dataclasses, built by keyword: each is one handoff a trace can show.

tokenizer manager -> scheduler:   TokenizedGenerateReqInput, AbortReq, FlushCacheReq, GetLoadReq,
                                  PauseGenerationReqInput, ContinueGenerationReqInput
scheduler -> detokenizer:         BatchTokenIDOutput, and the replies FlushCacheReqOutput, GetLoadReqOutput
detokenizer -> tokenizer manager: BatchStrOutput, and the replies passed on unchanged
scheduler ranks -> DataParallelController (--dp-size > 1): GetLoadReqOutput, whenever a rank's load changed

With --tokenizer-worker-num N > 1 each tokenizer worker receives on an address of its own: a request and
a control message carry it as `http_worker_ipc` (SGLang's name), the scheduler copies it into each output
row and reply, and the detokenizer sends each row back there. None: the one TokenizerManager's address.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(kw_only=True)
class TokenizedGenerateReqInput:
    rid: str
    input_text: str | None
    input_ids: list[int]
    sampling_params: dict[str, Any]  # SamplingParams fields; checked by the scheduler
    stream: bool = False
    return_logprob: bool = False  # send each output token's log-probability back
    top_logprobs_num: int = 0  # and this many most likely tokens at each position
    logprob_start_len: int = -1  # >= 0: the prompt tokens' logprobs too, from this position (SGLang's)
    # with --dp-size > 1: the rank the client chose (None: the controller picks)
    routed_dp_rank: int | None = None
    # --disaggregation-mode prefill|decode: where the prefill server's bootstrap listens, and the pairing room
    bootstrap_host: str | None = None
    bootstrap_port: int | None = None
    bootstrap_room: int | None = None
    http_worker_ipc: str | None = None  # the tokenizer worker that sent it (--tokenizer-worker-num > 1)


@dataclass(kw_only=True)
class AbortReq:
    rid: str


@dataclass(kw_only=True)
class FlushCacheReq:
    """Ask the scheduler to empty its prefix cache (it does so only when idle)."""

    http_worker_ipc: str | None = None  # where the reply goes


@dataclass(kw_only=True)
class FlushCacheReqOutput:
    """The scheduler flushes only when idle; the caller learns whether it did."""

    success: bool
    dp_rank: int = 0  # which scheduler answered (with --dp-size > 1 every rank does)
    http_worker_ipc: str | None = None  # the asker's, copied from the request


@dataclass(kw_only=True)
class PauseGenerationReqInput:
    """POST /pause_generation: no batch runs until ContinueGenerationReqInput; messages are still handled,
    and every request stays where it is (SGLang's mode "in_place", the one minisgl has)."""

    mode: str = "in_place"


@dataclass(kw_only=True)
class ContinueGenerationReqInput:
    """POST /continue_generation: batches run again."""


@dataclass(kw_only=True)
class GetLoadReq:
    """Ask the scheduler for its queues and KV cache use (the server's /health reports it)."""

    http_worker_ipc: str | None = None  # where the reply goes


@dataclass(kw_only=True)
class GetLoadReqOutput:
    num_running_reqs: int
    num_waiting_reqs: int
    free_slots: int  # KV slots nobody holds
    cached_slots: int  # KV slots held by the radix tree
    total_slots: int
    dp_rank: int = 0  # which scheduler answered (with --dp-size > 1 every rank does)
    http_worker_ipc: str | None = None  # the asker's, copied from the request


@dataclass(kw_only=True)
class BatchTokenIDOutput:
    """New output tokens of several requests from one round (every --stream-interval tokens), a column per
    field, a row per request (stream_output fills them row by row)."""

    rids: list[str] = field(default_factory=list)
    output_ids: list[list[int]] = field(default_factory=list)  # the tokens since the rid's previous output
    finished_reasons: list[dict | None] = field(default_factory=list)  # None while running, else .to_json()
    skip_special_tokens: list[bool] = field(default_factory=list)
    stop_strs: list[list[str]] = field(default_factory=list)
    prompt_tokens: list[int] = field(default_factory=list)
    completion_tokens: list[int] = field(default_factory=list)
    cached_tokens: list[int] = field(default_factory=list)
    max_new_tokens: list[int] = field(default_factory=list)  # after clamping to the context: the clamp shows
    # of the same tokens, for requests with return_logprob (empty lists for the others), as SGLang names them
    output_token_logprobs_val: list[list[float]] = field(default_factory=list)
    output_top_logprobs_val: list[list[list[float]]] = field(default_factory=list)  # per token, best first
    output_top_logprobs_idx: list[list[list[int]]] = field(default_factory=list)  # their token ids
    # the prompt's, for requests with logprob_start_len >= 0, in the rid's first output only (else empty)
    input_token_logprobs_val: list[list[float]] = field(default_factory=list)
    input_top_logprobs_val: list[list[list[float]]] = field(default_factory=list)
    input_top_logprobs_idx: list[list[list[int]]] = field(default_factory=list)
    http_worker_ipcs: list[str | None] = field(default_factory=list)  # each row's tokenizer worker


@dataclass(kw_only=True)
class BatchStrOutput:
    rids: list[str]
    output_strs: list[str]  # the text delta of each rid
    output_ids: list[list[int]]
    finished_reasons: list[dict | None]
    prompt_tokens: list[int]
    completion_tokens: list[int]
    cached_tokens: list[int]
    # as the scheduler runs it (clamped to the context)
    max_new_tokens: list[int] = field(default_factory=list)
    # passed on from BatchTokenIDOutput
    output_token_logprobs_val: list[list[float]] = field(default_factory=list)
    output_top_logprobs_val: list[list[list[float]]] = field(default_factory=list)
    output_top_logprobs_idx: list[list[list[int]]] = field(default_factory=list)
    input_token_logprobs_val: list[list[float]] = field(default_factory=list)
    input_top_logprobs_val: list[list[list[float]]] = field(default_factory=list)
    input_top_logprobs_idx: list[list[list[int]]] = field(default_factory=list)
    http_worker_ipcs: list[str | None] = field(default_factory=list)
