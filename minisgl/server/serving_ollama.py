"""Ollama's endpoints (SGLang's entrypoints/ollama/serving.py): /api/chat and /api/generate over the same
engine path as the OpenAI endpoints, so the same turns give the same answer.

    /api/chat       messages through the chat template, as /v1/chat/completions
    /api/generate   a prompt (and a system prompt) through the chat template, or as it is with raw: true

Ollama streams by default, as newline-delimited JSON: one object per piece of text, `done: false`, then a
last one with `done: true`, `done_reason` (stop or length) and the counts (prompt_eval_count, eval_count).
Errors are Ollama's `{"error": "..."}`, in the body or as the stream's last line.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import datetime, timezone
from typing import Any

from fastapi.responses import JSONResponse

from minisgl.server import tm_trace
from minisgl.server.errors import RequestError
from minisgl.server.protocol import GenerateReqInput
from minisgl.server.protocol_ollama import OllamaChatRequest, OllamaGenerateRequest, OllamaRequest
from minisgl.server.serving_base import OpenAIServingBase


def now() -> str:
    return datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")


class OllamaServing(OpenAIServingBase):
    stream_media_type = "application/x-ndjson"

    def _sampling_params(self, request: OllamaRequest) -> dict[str, Any]:
        return request.sampling_params()

    def _validate_request(self, request: OllamaRequest) -> None:
        """Ollama names a model `name:tag`: the served name, with or without `:latest`."""
        if request.model.removesuffix(":latest") != self.served_model_name:
            raise RequestError(f"model '{request.model}' not found; this server serves "
                               f"'{self.served_model_name}'", status_code=404)

    def _error_response(self, e: RequestError) -> JSONResponse:
        return JSONResponse({"error": e.message}, status_code=e.status_code)

    def _piece(self, text: str) -> dict[str, Any]:
        raise NotImplementedError

    def _last(self, out: dict[str, Any], text: str) -> dict[str, Any]:
        """The last object: the counts (Ollama's durations are left out: this server does not time them)."""
        meta = out["meta_info"]
        reason = meta["finish_reason"]["type"]
        return {**self._piece(text), "done": True, "done_reason": "length" if reason == "length" else "stop",
                "prompt_eval_count": meta["prompt_tokens"], "eval_count": meta["completion_tokens"]}

    def _build_response(self, out: dict[str, Any], request: OllamaRequest) -> dict[str, Any]:
        return self._last(out, out["text"])

    async def _generate_stream(self, first: dict[str, Any], generator: AsyncIterator[dict[str, Any]],
                               request: OllamaRequest, rid: str) -> AsyncIterator[str]:
        index, out = 0, first

        def line(payload: dict[str, Any], delta: str = "") -> str:
            nonlocal index
            data = json.dumps(payload, ensure_ascii=False) + "\n"
            tm_trace.sse_chunk(rid, index, delta, data)
            index += 1
            return data

        try:
            while out["meta_info"]["finish_reason"] is None:
                if out["delta"]:
                    yield line({**self._piece(out["delta"]), "done": False}, out["delta"])
                out = await generator.__anext__()
            yield line(self._last(out, out["delta"]), out["delta"])
            tm_trace.response_finished(rid, out["meta_info"], 200)
        except RequestError as e:  # too late for a status line: Ollama's error object, last
            tm_trace.error(rid, e.status_code, e.message)
            yield line({"error": e.message})
        except (asyncio.CancelledError, GeneratorExit):
            tm_trace.error(rid, 499, "the client closed the connection")
            raise
        finally:
            await generator.aclose()


class OllamaServingChat(OllamaServing):
    request_cls = OllamaChatRequest
    endpoint = "/api/chat"

    def _convert_to_internal_request(self, request: OllamaChatRequest, rid: str) -> GenerateReqInput:
        messages = [{"role": m.role, "content": m.content} for m in request.messages]
        return GenerateReqInput(rid=rid, messages=messages, sampling_params=request.sampling_params(),
                                stream=request.stream)

    def _piece(self, text: str) -> dict[str, Any]:
        return {"model": self.served_model_name, "created_at": now(),
                "message": {"role": "assistant", "content": text}}


class OllamaServingGenerate(OllamaServing):
    request_cls = OllamaGenerateRequest
    endpoint = "/api/generate"

    def _convert_to_internal_request(self, request: OllamaGenerateRequest, rid: str) -> GenerateReqInput:
        params = request.sampling_params()
        if request.raw:
            return GenerateReqInput(rid=rid, text=request.prompt, sampling_params=params,
                                    stream=request.stream)
        messages = ([{"role": "system", "content": request.system}] if request.system else []) + [
            {"role": "user", "content": request.prompt}]
        return GenerateReqInput(rid=rid, messages=messages, sampling_params=params, stream=request.stream)

    def _piece(self, text: str) -> dict[str, Any]:
        return {"model": self.served_model_name, "created_at": now(), "response": text}
