"""Engine: the offline API. The same Scheduler as the server, driven in this process and thread.

    engine = Engine(dtype="float32", max_total_tokens=4096)
    engine.generate("The capital of France is", {"max_new_tokens": 8, "temperature": 0})
    engine.generate([{"role": "user", "content": "Hi!"}])          # chat messages
    for chunk in engine.generate("Once upon", stream=True): ...   # text deltas
"""

from __future__ import annotations

import itertools
import uuid
from collections import deque
from typing import Any, Iterator

from minisgl.detokenizer.detokenizer_manager import DetokenizerManager
from minisgl.model_executor.model_runner import ModelRunner
from minisgl.model_loader.loader import load_model_config, load_tokenizer, resolve_model
from minisgl.scheduler.io_struct import AbortReq, BatchStrOutput, TokenizedGenerateReqInput
from minisgl.scheduler.scheduler import Scheduler
from minisgl.server import tm_trace
from minisgl.server.inproc_io import InProcessQueue
from minisgl.server_args import ServerArgs
from tracer.api import tracer


class Engine:
    def __init__(self, model: str | None = None, trace_dir: str | None = None, trace_level: int = 2,
                 _loaded: Engine | None = None, **kwargs: Any):
        self.server_args = ServerArgs(model=model, **kwargs)
        self.server_args.validate()
        if _loaded is None:
            source = resolve_model(self.server_args.model)
            self.model_config = load_model_config(source)
            self.tokenizer = load_tokenizer(source)
            self.model_runner = ModelRunner(self.model_config, source, self.server_args)
        else:  # share the weights and tokenizer; fresh pools and scheduler
            self.model_config, self.tokenizer = _loaded.model_config, _loaded.tokenizer
            self.model_runner = ModelRunner(self.model_config, _loaded.model_runner.source, self.server_args,
                                            model=_loaded.model_runner.model)
        self.trace_path = tracer.configure(trace_dir, "engine", trace_level) if trace_dir is not None else None
        self._to_scheduler = InProcessQueue("tokenizer_manager", "scheduler")
        self._to_detokenizer = InProcessQueue("scheduler", "detokenizer")
        self._to_tokenizer = InProcessQueue("detokenizer", "tokenizer_manager")
        self.scheduler = Scheduler(self.server_args, self.model_runner, self.tokenizer,
                                   self._to_scheduler, self._to_detokenizer)
        self.detokenizer = DetokenizerManager(self.tokenizer)
        self._states: dict[str, dict] = {}  # rid -> accumulated result

    # ---- public API -------------------------------------------------------------------------------
    def generate(self, prompt: Any = None, sampling_params: dict | list[dict] | None = None, *,
                 input_ids: list[int] | list[list[int]] | None = None, stream: bool = False,
                 rid: str | list[str] | None = None):
        """prompt: a string, chat messages (a list of {"role", "content"}), or a list of either.
        Returns one result dict per prompt (a list for a list), or an iterator of deltas if stream."""
        prompts, single = self._normalize_prompts(prompt, input_ids)
        params = sampling_params if isinstance(sampling_params, list) else [sampling_params or {}] * len(prompts)
        rids = rid if isinstance(rid, list) else [rid or uuid.uuid4().hex for _ in prompts]
        if len(params) != len(prompts) or len(rids) != len(prompts):
            raise ValueError("sampling_params and rid lists must have one entry per prompt")
        if len(set(rids)) != len(rids) or any(r in self._states for r in rids):
            raise ValueError(f"duplicate request id in {rids}")
        if stream:
            if not single:
                raise ValueError("stream=True takes a single prompt")
            return self._stream(prompts[0], params[0], rids[0])
        for (text, ids), p, r in zip(prompts, params, rids):
            self._submit(r, text, ids, p, stream=False)
        while any(not self._states[r]["done"] for r in rids):
            self._step()
        results = [self._finish_result(r) for r in rids]
        return results[0] if single else results

    def fork(self, trace_dir: str | None = None, trace_level: int = 2, **overrides: Any) -> Engine:
        """A new Engine on the same loaded weights with other scheduler or memory flags (not dtype/model)."""
        args = {**vars(self.server_args), **overrides}
        for fixed in ("model", "dtype", "device"):
            if args[fixed] != getattr(self.server_args, fixed):
                raise ValueError(f"fork() cannot change {fixed}; create a new Engine")
        model = args.pop("model")
        return Engine(model, trace_dir=trace_dir, trace_level=trace_level, _loaded=self, **args)

    def abort(self, rid: str) -> None:
        self._to_scheduler.send(AbortReq(rid))

    def flush_cache(self) -> bool:
        return self.scheduler.flush_cache()

    def shutdown(self) -> None:
        self._states.clear()
        if self.trace_path is not None:
            tracer.close()
            self.trace_path = None

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()

    # ---- internals --------------------------------------------------------------------------------
    def _normalize_prompts(self, prompt, input_ids) -> tuple[list[tuple[str | None, list[int]]], bool]:
        if (prompt is None) == (input_ids is None):
            raise ValueError("pass exactly one of prompt or input_ids")
        if input_ids is not None:
            single = bool(input_ids) and isinstance(input_ids[0], int)
            batch = [input_ids] if single else input_ids
            return [(None, list(ids)) for ids in batch], single
        single = isinstance(prompt, str) or _is_chat(prompt)
        batch = [prompt] if single else list(prompt)
        return [self._tokenize(p) for p in batch], single

    def _tokenize(self, p: Any) -> tuple[str, list[int]]:
        if isinstance(p, str):
            return p, self.tokenizer.encode(p, add_special_tokens=False)
        if _is_chat(p):
            text = self.tokenizer.apply_chat_template(p, add_generation_prompt=True, tokenize=False)
            return text, self.tokenizer.encode(text, add_special_tokens=False)
        raise ValueError(f"a prompt must be a string or a list of chat messages, not {type(p).__name__}")

    def _submit(self, rid: str, text: str | None, ids: list[int], params: dict, stream: bool) -> None:
        if rid in self._states:
            raise ValueError(f"duplicate request id {rid!r}")
        self._states[rid] = {"text": "", "output_ids": [], "done": False, "out": deque(),
                             "requested_max_new_tokens": params.get("max_new_tokens")}
        tm_trace.tokenized(rid, text, ids, self.tokenizer)
        self._to_scheduler.send(TokenizedGenerateReqInput(rid, text, ids, dict(params), stream))

    def _step(self) -> None:
        self.scheduler.run_one_round()
        for token_out in self._to_detokenizer.recv_all():
            # in one process the text comes straight back: a send and its receive
            self._to_tokenizer.send(self.detokenizer.handle_batch_token_id_out(token_out))
            for out in self._to_tokenizer.recv_all():
                self._handle_str_output(out)

    def _handle_str_output(self, out: BatchStrOutput) -> None:
        for i, rid in enumerate(out.rids):
            st = self._states.get(rid)
            if st is None:
                continue
            st["text"] += out.output_strs[i]
            st["output_ids"] += out.output_ids[i]
            st["usage"] = {"prompt_tokens": out.prompt_tokens[i], "completion_tokens": out.completion_tokens[i],
                           "cached_tokens": out.cached_tokens[i]}
            st["max_new_tokens"] = out.max_new_tokens[i]
            st["finish_reason"] = out.finished_reasons[i]
            st["out"].append((out.output_strs[i], out.output_ids[i], out.finished_reasons[i]))
            st["done"] = out.finished_reasons[i] is not None

    def _finish_result(self, rid: str) -> dict:
        st = self._states.pop(rid)
        reason = st["finish_reason"]
        if reason and reason.get("type") == "abort" and reason.get("status_code") == 400:
            raise ValueError(reason["message"])
        result = {"rid": rid, "text": st["text"], "output_ids": st["output_ids"], "finish_reason": reason,
                  "usage": st["usage"]}
        asked = st["requested_max_new_tokens"]
        if asked is not None and st["max_new_tokens"] < asked:
            result["warning"] = f"max_new_tokens {asked} was clamped to {st['max_new_tokens']} to fit the context"
        return result

    def _stream(self, prompt: tuple[str | None, list[int]], params: dict, rid: str) -> Iterator[dict]:
        self._submit(rid, prompt[0], prompt[1], params, stream=True)
        st = self._states[rid]
        try:
            for _ in itertools.count():
                while st["out"]:
                    text, ids, reason = st["out"].popleft()
                    if reason and reason.get("type") == "abort" and reason.get("status_code") == 400:
                        raise ValueError(reason["message"])
                    yield {"rid": rid, "text": text, "output_ids": ids, "finish_reason": reason,
                           "usage": st["usage"] if reason else None}
                if st["done"]:
                    return
                self._step()
        finally:
            if not st["done"]:  # the caller stopped early: abort and let the scheduler release it
                self.abort(rid)
                while not st["done"]:
                    self._step()
            self._states.pop(rid, None)


def _is_chat(p: Any) -> bool:
    return isinstance(p, list) and bool(p) and all(isinstance(m, dict) and "role" in m for m in p)
