"""Engine: the offline API. The same Scheduler as the server, driven in this process and thread.

    engine = Engine(dtype="float32", max_total_tokens=4096)
    engine.generate("The capital of France is", {"max_new_tokens": 8, "temperature": 0})
    engine.generate([{"role": "user", "content": "Hi!"}])          # chat messages
    engine.generate("Hi", return_logprob=True, top_logprobs_num=5)  # + output_token_logprobs,
                                                                        output_top_logprobs
    for chunk in engine.generate("Once upon", stream=True): ...   # text deltas

Its front end is the server's: a TokenizerManagerCore tokenizes and validates each GenerateReqInput and files
the detokenizer's BatchStrOutput into ReqStates. Only the transport differs: in-process queues stand in for
the sockets, and instead of three processes looping on their own, `step()` runs one scheduler round and
passes what came out through the DetokenizerManager to the TokenizerManagerCore. Scenarios and tests drive
the engine round by round with `submit`, `step` and `result`. A prompt too long for the context is refused
by the scheduler (the server's TokenizerManager refuses it before sending, from the limits it was given).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

from pydantic import ValidationError

from minisgl.detokenizer.detokenizer_manager import DetokenizerManager
from minisgl.labs.swap import apply_from_env
from minisgl.model_executor.model_runner import ModelRunner
from minisgl.model_loader.loader import load_model_config, load_tokenizer, resolve_model
from minisgl.scheduler.io_struct import AbortReq, TokenizedGenerateReqInput
from minisgl.scheduler.scheduler import Scheduler
from minisgl.server.errors import RequestError, format_validation_error
from minisgl.server.inproc_io import InProcessQueue
from minisgl.server.protocol import GenerateReqInput
from minisgl.server.tokenizer_manager_core import ReqState, TokenizerManagerCore, refusal
from minisgl.server_args import ServerArgs
from tracer.api import tracer


class Engine:
    def __init__(self, model: str | None = None, trace_dir: str | None = None, trace_level: int = 2,
                 _loaded: Engine | None = None, **kwargs: Any):
        apply_from_env()  # a lab's component (MINISGL_LAB=COMPONENT=FILE), before anything is built
        self.server_args = ServerArgs(model=model, **kwargs)
        self.server_args.validate()
        if self.server_args.dp_size != 1:
            raise ValueError("--dp-size > 1 runs one scheduler process per rank: it needs `minisgl serve`, "
                             "the offline Engine runs one scheduler in its own process")
        if self.server_args.tp_size > 1:
            raise ValueError("the offline Engine runs in one process: --tp-size > 1 needs `minisgl serve`, "
                             "which starts one scheduler process per rank")
        if _loaded is None:
            source = resolve_model(self.server_args.model)
            self.model_config = load_model_config(source)
            self.tokenizer = load_tokenizer(source)
            self.model_runner = ModelRunner(self.model_config, source, self.server_args)
        else:  # share the weights and tokenizer; fresh pools and scheduler
            self.model_config, self.tokenizer = _loaded.model_config, _loaded.tokenizer
            self.model_runner = ModelRunner(self.model_config, _loaded.model_runner.source, self.server_args,
                                            model=_loaded.model_runner.model)
        self.trace_path = (tracer.configure(trace_dir, "engine", trace_level) if trace_dir is not None
                           else None)
        self._to_scheduler = InProcessQueue("tokenizer_manager", "scheduler")
        self._to_detokenizer = InProcessQueue("scheduler", "detokenizer")
        self._to_tokenizer = InProcessQueue("detokenizer", "tokenizer_manager")
        self.scheduler = Scheduler(self.server_args, self.model_runner, self.tokenizer,
                                   self._to_scheduler, self._to_detokenizer)
        self.detokenizer = DetokenizerManager(self.tokenizer)
        self.tokenizer_manager = TokenizerManagerCore(self.tokenizer, self.model_config.vocab_size,
                                                      self._to_scheduler)

    # ---- public API -------------------------------------------------------------------------------
    def generate(self, prompt: Any = None, sampling_params: dict | list[dict] | None = None, *,
                 input_ids: list[int] | list[list[int]] | None = None, stream: bool = False,
                 rid: str | list[str] | None = None, return_logprob: bool = False, top_logprobs_num: int = 0,
                 return_text_in_logprobs: bool = False, logprob_start_len: int = -1):
        """prompt: a string, chat messages (a list of {"role", "content"}), or a list of either.
        Returns one result dict per prompt (a list for a list), or an iterator of deltas if stream.
        With return_logprob (SGLang's arguments), each result or delta also has output_token_logprobs, a
        (logprob, token id, text or None) per output token, and output_top_logprobs, the top_logprobs_num
        most likely at each position; logprobs are of the raw logits, whatever the temperature. With
        logprob_start_len >= 0 too, input_token_logprobs: a triple per prompt token from that one (the first
        prompt token's logprob is None).
        A request the engine refuses raises ValueError (RequestError, with the message a server would
        send)."""
        logprob_args = {"return_logprob": return_logprob, "top_logprobs_num": top_logprobs_num,
                        "return_text_in_logprobs": return_text_in_logprobs,
                        "logprob_start_len": logprob_start_len}
        objs, single = self._make_requests(prompt, input_ids, sampling_params, rid, stream, logprob_args)
        if stream:
            if not single:
                raise ValueError("stream=True takes a single prompt")
            return self._stream(objs[0])
        # every request is checked before the first is sent: a refusal leaves nothing running
        tokenized = [self.tokenizer_manager._tokenize_one_request(obj) for obj in objs]
        states = [self.submit(obj, tok) for obj, tok in zip(objs, tokenized)]
        while not all(state.finished for state in states):
            self.step()
        # overlap loop: rows that ran past a finish give their KV slot back
        while self.scheduler.result_queue:
            self.step()
        results = [self.result(state) for state in states]
        return results[0] if single else results

    def fork(self, trace_dir: str | None = None, trace_level: int = 2, **overrides: Any) -> Engine:
        """A new Engine on the same loaded weights with other scheduler or memory flags (not dtype/model/
        quantization: those choose the weights; nor --dequant-gemm-rows: the products are shared)."""
        args = {**vars(self.server_args), **overrides}
        for fixed in ("model", "dtype", "device", "quantization", "dequant_gemm_rows"):
            if args[fixed] != getattr(self.server_args, fixed):
                raise ValueError(f"fork() cannot change {fixed}; create a new Engine")
        model = args.pop("model")
        return Engine(model, trace_dir=trace_dir, trace_level=trace_level, _loaded=self, **args)

    def abort(self, rid: str) -> None:
        self._to_scheduler.send(AbortReq(rid=rid))

    def flush_cache(self) -> bool:
        return self.scheduler.flush_cache()

    def shutdown(self) -> None:
        self.tokenizer_manager.rid_to_state.clear()
        if self.scheduler.tp_worker_client is not None:  # the overlap loop's forward thread
            self.scheduler.tp_worker_client.close()
        if self.trace_path is not None:
            tracer.close()
            self.trace_path = None

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()

    # ---- round by round: what generate() does, for callers that act between rounds ----------------
    def submit(self, obj: GenerateReqInput, tokenized: TokenizedGenerateReqInput | None = None) -> ReqState:
        """Send one request to the scheduler (it runs from the next step on); its ReqState fills as it
        runs."""
        tm = self.tokenizer_manager
        if tokenized is None:
            tokenized = tm._tokenize_one_request(obj)
        state = tm._init_req_state(obj)
        tm._send_one_request(tokenized)
        return state

    def step(self) -> None:
        """One scheduler round, then the detokenizer and the TokenizerManagerCore on what it sent out."""
        self.scheduler.run_round()  # the overlap round forms round N+1 and processes N-1 while N runs
        for token_out in self._to_detokenizer.recv_all():
            # in one process the text comes straight back: a send and its receive
            self._to_tokenizer.send(self.detokenizer.handle_batch_token_id_out(token_out))
            for str_out in self._to_tokenizer.recv_all():
                self.tokenizer_manager._handle_batch_output(str_out)

    def result(self, state: ReqState) -> dict:
        """A finished request's answer; a refused one raises its error."""
        error = refusal(state.meta_info)
        if error is not None:
            raise error
        result = {"rid": state.obj.rid, "text": state.text, "output_ids": state.output_ids,
                  "finish_reason": state.meta_info["finish_reason"], "usage": _usage(state.meta_info)}
        if state.meta_info["warning"]:
            result["warning"] = state.meta_info["warning"]
        if state.obj.return_logprob:
            result["output_token_logprobs"] = state.output_token_logprobs
            result["output_top_logprobs"] = state.output_top_logprobs
            if state.obj.logprob_start_len >= 0:
                result["input_token_logprobs"] = state.input_token_logprobs
                result["input_top_logprobs"] = state.input_top_logprobs
        return result

    # ---- internals --------------------------------------------------------------------------------
    def _make_requests(self, prompt, input_ids, sampling_params, rid, stream: bool,
                       logprob_args: dict[str, Any]
                       ) -> tuple[list[GenerateReqInput], bool]:
        """The GenerateReqInput of each prompt, and whether a single prompt (not a list) was given."""
        if (prompt is None) == (input_ids is None):
            raise ValueError("pass exactly one of prompt or input_ids")
        if input_ids is not None:
            single = bool(input_ids) and isinstance(input_ids[0], int)
            inputs = [{"input_ids": list(ids)} for ids in ([input_ids] if single else input_ids)]
        else:
            single = isinstance(prompt, str) or _is_chat(prompt)
            inputs = [_prompt_input(p) for p in ([prompt] if single else prompt)]
        params = (sampling_params if isinstance(sampling_params, list)
                  else [sampling_params or {}] * len(inputs))
        rids = rid if isinstance(rid, list) else [rid or uuid.uuid4().hex for _ in inputs]
        if len(params) != len(inputs) or len(rids) != len(inputs):
            raise ValueError("sampling_params and rid lists must have one entry per prompt")
        if len(set(rids)) != len(rids) or any(r in self.tokenizer_manager.rid_to_state for r in rids):
            raise RequestError(f"duplicate request id in {rids}", param="rid")
        try:
            objs = [GenerateReqInput(rid=r, sampling_params=dict(p), stream=stream, **logprob_args, **x)
                    for x, p, r in zip(inputs, params, rids)]
        except ValidationError as e:
            err = format_validation_error(e).error
            raise RequestError(err.message, param=err.param) from None
        return objs, single

    def _stream(self, obj: GenerateReqInput) -> Iterator[dict]:
        state = self.submit(obj)
        try:
            while True:
                pieces, state.out_list = state.out_list, []
                for piece in pieces:
                    meta = piece["meta_info"]
                    error = refusal(meta)
                    if error is not None:
                        raise error
                    reason = meta["finish_reason"]
                    delta = {"rid": obj.rid, "text": piece["delta"], "output_ids": piece["output_ids"],
                             "finish_reason": reason, "usage": _usage(meta) if reason else None}
                    if obj.return_logprob:
                        delta["output_token_logprobs"] = piece["output_token_logprobs"]
                        delta["output_top_logprobs"] = piece["output_top_logprobs"]
                    yield delta
                if state.finished:
                    return
                self.step()
        finally:
            if not state.finished:  # the caller stopped early: abort and let the scheduler release it
                self.abort(obj.rid)
                while not state.finished:
                    self.step()


def _is_chat(p: Any) -> bool:
    return isinstance(p, list) and bool(p) and all(isinstance(m, dict) and "role" in m for m in p)


def _prompt_input(p: Any) -> dict[str, Any]:
    if isinstance(p, str):
        return {"text": p}
    if _is_chat(p):
        return {"messages": p}
    raise ValueError(f"a prompt must be a string or a list of chat messages, not {type(p).__name__}")


def _usage(meta_info: dict) -> dict[str, int]:
    return {k: meta_info[k] for k in ("prompt_tokens", "completion_tokens", "cached_tokens")}
