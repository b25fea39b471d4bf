"""TokenizerManagerCore: the part of SGLang's TokenizerManager that needs no event loop.

The server's TokenizerManager and the offline Engine both build on it, so a request becomes tokens, and the
engine's outputs become an answer, the same way in both:

    in:   GenerateReqInput --_tokenize_one_request--> TokenizedGenerateReqInput --_send_one_request-->
          scheduler
    out:  BatchStrOutput --_handle_batch_output--> each rid's ReqState: text, output_ids, out_list, meta_info

Everything a request can be refused for before it leaves (bad sampling params, a template that rejects the
messages, a token id outside the vocabulary, a rid already running) is checked here, once, at this
boundary; what reaches the scheduler is well formed. The scheduler decides whether max_new_tokens must be
shortened to fit the context and reports the value it runs; `clamp_warning` turns that into the one
warning both front ends return.

What is left to each front end: the server's TokenizerManager wakes a waiter per request (`_wake`) and
receives from the detokenizer on its event loop; the offline Engine runs a scheduler round and the
detokenizer itself, then reads the ReqStates.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from minisgl.sampling.sampling_params import SamplingParams
from minisgl.scheduler.io_struct import BatchStrOutput, TokenizedGenerateReqInput
from minisgl.server import tm_trace
from minisgl.server.errors import RequestError
from minisgl.server.logprobs import LogprobEntry, detokenize_logprob_tokens
from minisgl.server.protocol import GenerateReqInput


@dataclass
class ReqState:
    """One request's answer so far, filled by _handle_batch_output and read by whoever waits for it."""

    obj: GenerateReqInput
    # pieces not taken yet: delta, output_ids, meta_info
    out_list: list[dict[str, Any]] = field(default_factory=list)
    finished: bool = False
    # the server's waiter sleeps on it; the offline Engine reads `finished`
    event: asyncio.Event | None = None
    text: str = ""  # everything decoded so far
    output_ids: list[int] = field(default_factory=list)
    # of the latest piece: finish_reason, token counts
    meta_info: dict[str, Any] = field(default_factory=dict)
    error: RequestError | None = None  # set when the engine can no longer answer
    output_token_logprobs: list[LogprobEntry] = field(default_factory=list)  # only with obj.return_logprob
    output_top_logprobs: list[list[LogprobEntry]] = field(default_factory=list)
    prompt_ids: list[int] = field(default_factory=list)  # the tokenized prompt, for its logprobs' triples
    input_token_logprobs: list[LogprobEntry] = field(default_factory=list)  # with logprob_start_len >= 0
    input_top_logprobs: list[list[LogprobEntry] | None] = field(default_factory=list)


class TokenizerManagerCore:
    def __init__(self, tokenizer, vocab_size: int, send_to_scheduler):
        self.tokenizer = tokenizer
        self.vocab_size = vocab_size
        # .send(message): a socket, or the Engine's in-process queue
        self.send_to_scheduler = send_to_scheduler
        self.rid_to_state: dict[str, ReqState] = {}  # the requests still running

    # ---- in: a request becomes tokens ---------------------------------------------------------------
    def _tokenize_one_request(self, obj: GenerateReqInput) -> TokenizedGenerateReqInput:
        """Validate the sampling params, apply the chat template if there are messages, and tokenize."""
        validate_sampling_params(obj.sampling_params)
        text: str | None
        if obj.messages is not None:
            try:
                text = self.tokenizer.apply_chat_template(obj.messages, tools=obj.tools,
                                                          add_generation_prompt=True, tokenize=False)
            # (a template may reject turns in an order it does not allow)
            except Exception as e:  # noqa: BLE001
                raise RequestError(f"the chat template rejected the messages: {e}",
                                   param="messages") from None
            input_ids = self.tokenizer.encode(text, add_special_tokens=False)
        elif obj.text is not None:
            text, input_ids = obj.text, self.tokenizer.encode(obj.text, add_special_tokens=False)
        else:
            text, input_ids = None, list(obj.input_ids or [])
            bad = [t for t in input_ids if t >= self.vocab_size]
            if bad:
                raise RequestError(f"input_ids has token id {bad[0]}, but the vocabulary has "
                                   f"{self.vocab_size} ids", param="input_ids")
        return TokenizedGenerateReqInput(
            rid=obj.rid, input_text=text, input_ids=input_ids, sampling_params=dict(obj.sampling_params),
            stream=obj.stream, return_logprob=obj.return_logprob,
            top_logprobs_num=obj.top_logprobs_num if obj.return_logprob else 0,
            logprob_start_len=obj.logprob_start_len if obj.return_logprob else -1,
            routed_dp_rank=obj.routed_dp_rank, bootstrap_host=obj.bootstrap_host,
            bootstrap_port=obj.bootstrap_port, bootstrap_room=obj.bootstrap_room)

    def _init_req_state(self, obj: GenerateReqInput, event: asyncio.Event | None = None) -> ReqState:
        if obj.rid in self.rid_to_state:
            raise RequestError(f"duplicate request id {obj.rid!r}: a request with it is running", param="rid")
        state = ReqState(obj=obj, event=event)
        self.rid_to_state[obj.rid] = state
        return state

    def _send_one_request(self, tokenized: TokenizedGenerateReqInput) -> None:
        """Hand the request to the scheduler and return: the model's work is not awaited here."""
        tm_trace.tokenized(tokenized.rid, tokenized.input_text, tokenized.input_ids, self.tokenizer)
        state = self.rid_to_state.get(tokenized.rid)
        if state is not None and tokenized.logprob_start_len >= 0:
            state.prompt_ids = list(tokenized.input_ids)
        self.send_to_scheduler.send(tokenized)

    # ---- out: the detokenizer's text is filed per request -------------------------------------------
    def _handle_batch_output(self, recv_obj: BatchStrOutput) -> None:
        for i, rid in enumerate(recv_obj.rids):
            state = self.rid_to_state.get(rid)
            if state is None:  # its client left and the state was dropped; this is the scheduler's last word
                continue
            reason = recv_obj.finished_reasons[i]
            delta = recv_obj.output_strs[i]
            state.text += delta
            state.output_ids.extend(recv_obj.output_ids[i])
            running_max = recv_obj.max_new_tokens[i] if recv_obj.max_new_tokens else None
            state.meta_info = {
                "id": rid, "finish_reason": reason, "prompt_tokens": recv_obj.prompt_tokens[i],
                "completion_tokens": recv_obj.completion_tokens[i],
                "cached_tokens": recv_obj.cached_tokens[i],
                "warning": clamp_warning(state.obj, running_max, recv_obj.prompt_tokens[i]),
            }
            piece = {"delta": delta, "output_ids": list(recv_obj.output_ids[i]), "meta_info": state.meta_info}
            if state.obj.return_logprob:
                piece.update(self._add_logprobs(state, recv_obj, i))
            state.out_list.append(piece)
            if reason is not None:
                state.finished = True
                del self.rid_to_state[rid]
            self._wake(rid, state, delta)

    def _add_input_logprobs(self, state: ReqState, vals: list[float], top_vals: list[list[float]],
                            top_idxs: list[list[int]]) -> None:
        """SGLang's input_token_logprobs: a triple per prompt token from logprob_start_len, the first with
        logprob None when it is the prompt's first token (nothing comes before it to score it); and
        input_top_logprobs, the best at each (None for that first token)."""
        with_text = state.obj.return_text_in_logprobs
        start = max(state.obj.logprob_start_len, 0)
        ids = state.prompt_ids[start:]
        tops = [detokenize_logprob_tokens(self.tokenizer, v, t, with_text)
                for v, t in zip(top_vals, top_idxs)]
        if start == 0:
            vals, tops = [None, *vals], [None, *tops]
        state.input_token_logprobs = detokenize_logprob_tokens(self.tokenizer, vals, ids, with_text)
        state.input_top_logprobs = tops

    def _add_logprobs(self, state: ReqState, recv_obj: BatchStrOutput, i: int) -> dict[str, Any]:
        """File the i-th rid's new logprobs as SGLang's triples: all so far in meta_info, the new ones in the
        piece."""
        with_text = state.obj.return_text_in_logprobs
        have = i < len(recv_obj.output_token_logprobs_val)  # an older sender may leave them out
        vals = recv_obj.output_token_logprobs_val[i] if have else []
        tokens = detokenize_logprob_tokens(self.tokenizer, vals, recv_obj.output_ids[i][-len(vals):],
                                           with_text)
        top_vals = recv_obj.output_top_logprobs_val[i] if have else []
        top_idxs = recv_obj.output_top_logprobs_idx[i] if have else []
        # the chosen token's value wherever it appears: the sampler's kernel sums exps its own way, so a top
        # entry for the same token may differ in the fifth decimal
        chosen = [{tid: val} for val, tid, _ in tokens]
        tops = [detokenize_logprob_tokens(self.tokenizer, [c.get(tid, v) for v, tid in zip(vs, ids)], ids,
                                          with_text)
                for vs, ids, c in zip(top_vals, top_idxs, chosen)]
        state.output_token_logprobs.extend(tokens)
        state.output_top_logprobs.extend(tops)
        state.meta_info["output_token_logprobs"] = list(state.output_token_logprobs)
        state.meta_info["output_top_logprobs"] = list(state.output_top_logprobs)
        if i < len(recv_obj.input_token_logprobs_val) and recv_obj.input_token_logprobs_val[i]:
            self._add_input_logprobs(state, recv_obj.input_token_logprobs_val[i],
                                     recv_obj.input_top_logprobs_val[i], recv_obj.input_top_logprobs_idx[i])
        if state.obj.logprob_start_len >= 0:
            state.meta_info["input_token_logprobs"] = list(state.input_token_logprobs)
            state.meta_info["input_top_logprobs"] = list(state.input_top_logprobs)
        return {"output_token_logprobs": tokens, "output_top_logprobs": tops}

    def _wake(self, rid: str, state: ReqState, delta: str) -> None:
        """Tell whoever waits for `rid` that a piece arrived. The offline Engine has nobody waiting."""


def validate_sampling_params(params: dict[str, Any]) -> None:
    """The one check of a request's sampling params, at the front end: a bad value is the client's error."""
    try:
        SamplingParams.from_dict(params).verify()
    except (ValueError, TypeError) as e:
        raise RequestError(str(e), param="sampling_params") from None


def refusal(meta_info: dict[str, Any]) -> RequestError | None:
    """The error to raise for a request the scheduler refused (an abort with an HTTP status), else None."""
    reason = meta_info.get("finish_reason")
    if reason and reason.get("type") == "abort" and reason.get("status_code"):
        return RequestError(reason["message"], status_code=reason["status_code"])
    return None


def clamp_warning(obj: GenerateReqInput, running: int | None, prompt_tokens: int) -> str | None:
    """The scheduler shortens a max_new_tokens that would overrun the context; say so to the client."""
    asked = obj.sampling_params.get("max_new_tokens")
    if running is None or asked is None or running >= asked:
        return None
    return (f"max_new_tokens {asked} was clamped to {running}: the prompt's {prompt_tokens} tokens plus the "
            f"output must fit the context")
