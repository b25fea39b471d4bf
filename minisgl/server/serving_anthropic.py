"""AnthropicServing: POST /v1/messages, Anthropic's Messages API over the same engine path as the OpenAI
endpoints (SGLang's entrypoints/anthropic/serving.py translates to its chat completions the same way).

    system + messages (text blocks)      -> the chat template's messages, as /v1/chat/completions sends them
    max_tokens, stop_sequences, ...      -> max_new_tokens, stop, ...
    finish: stop token / stop string /   -> stop_reason end_turn / stop_sequence (with the string) /
            length                          max_tokens

A stream is Anthropic's named events: message_start, content_block_start, ping, a content_block_delta per
piece of text, content_block_stop, message_delta (stop_reason, usage), message_stop. Errors keep Anthropic's
shape: {"type": "error", "error": {"type", "message"}}, in the body or as an `error` event mid-stream.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi.responses import JSONResponse

from minisgl.server import tm_trace
from minisgl.server.errors import RequestError
from minisgl.server.protocol import GenerateReqInput, new_id
from minisgl.server.protocol_anthropic import (
    AnthropicMessagesRequest,
    AnthropicMessagesResponse,
    AnthropicUsage,
)
from minisgl.server.serving_base import OpenAIServingBase

# Anthropic's error types by HTTP status (others: api_error)
ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
               404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
               503: "overloaded_error"}


def anthropic_error(status: int, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": ERROR_TYPES.get(status, "api_error"), "message": message}}


def stop_reason_of(meta: dict[str, Any]) -> tuple[str | None, str | None]:
    """(stop_reason, stop_sequence) from the engine's finish_reason."""
    reason = meta["finish_reason"]
    if reason is None:
        return None, None
    if reason["type"] == "length":
        return "max_tokens", None
    matched = reason.get("matched")
    return ("stop_sequence", matched) if isinstance(matched, str) else ("end_turn", None)


def usage_of(meta: dict[str, Any], output_tokens: int | None = None) -> AnthropicUsage:
    return AnthropicUsage(input_tokens=meta["prompt_tokens"],
                          output_tokens=meta["completion_tokens"] if output_tokens is None else output_tokens,
                          cache_read_input_tokens=meta["cached_tokens"])


def sse_event(payload: dict[str, Any]) -> str:
    return f"event: {payload['type']}\ndata: {json.dumps(payload, ensure_ascii=False)}\n\n"


class AnthropicServing(OpenAIServingBase):
    request_cls = AnthropicMessagesRequest
    endpoint = "/v1/messages"

    def _sampling_params(self, request: AnthropicMessagesRequest) -> dict[str, Any]:
        params = {"temperature": request.temperature, "top_p": request.top_p, "top_k": request.top_k,
                  "stop": request.stop_sequences}
        return {"max_new_tokens": request.max_tokens, **{k: v for k, v in params.items() if v is not None}}

    def _convert_to_internal_request(self, request: AnthropicMessagesRequest, rid: str) -> GenerateReqInput:
        system = request.system_text()
        messages = ([{"role": "system", "content": system}] if system is not None else []) + [
            {"role": m.role, "content": m.text()} for m in request.messages]
        return GenerateReqInput(rid=rid, messages=messages, sampling_params=self._sampling_params(request),
                                stream=request.stream)

    def _error_response(self, e: RequestError) -> JSONResponse:
        return JSONResponse(anthropic_error(e.status_code, e.message), status_code=e.status_code)

    def _build_response(self, out: dict[str, Any], request: AnthropicMessagesRequest) -> dict[str, Any]:
        meta = out["meta_info"]
        stop_reason, stop_sequence = stop_reason_of(meta)
        response = AnthropicMessagesResponse(id=f"msg_{meta['id']}", model=self.served_model_name,
                                             content=[{"type": "text", "text": out["text"]}],
                                             stop_reason=stop_reason, stop_sequence=stop_sequence,
                                             usage=usage_of(meta))
        return response.model_dump(mode="json")

    async def _generate_stream(self, first: dict[str, Any], generator: AsyncIterator[dict[str, Any]],
                               request: AnthropicMessagesRequest, rid: str) -> AsyncIterator[str]:
        index, out = 0, first

        def event(payload: dict[str, Any], delta: str = "") -> str:
            nonlocal index
            data = sse_event(payload)
            tm_trace.sse_chunk(rid, index, delta, data)
            index += 1
            return data

        meta = first["meta_info"]
        message = AnthropicMessagesResponse(id=f"msg_{meta.get('id') or new_id()}",
                                            model=self.served_model_name, content=[], stop_reason=None,
                                            usage=usage_of(meta, 0))
        yield event({"type": "message_start", "message": message.model_dump(mode="json")})
        yield event({"type": "content_block_start", "index": 0,
                     "content_block": {"type": "text", "text": ""}})
        yield event({"type": "ping"})
        try:
            while True:
                if out["delta"]:
                    yield event({"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "text_delta", "text": out["delta"]}}, out["delta"])
                meta = out["meta_info"]
                if meta["finish_reason"] is not None:
                    break
                out = await generator.__anext__()
            stop_reason, stop_sequence = stop_reason_of(meta)
            yield event({"type": "content_block_stop", "index": 0})
            yield event({"type": "message_delta",
                         "delta": {"stop_reason": stop_reason, "stop_sequence": stop_sequence},
                         "usage": {"output_tokens": meta["completion_tokens"]}})
            yield event({"type": "message_stop"})
            tm_trace.response_finished(rid, meta, 200)
        except RequestError as e:  # too late for a status line: Anthropic's error event
            tm_trace.error(rid, e.status_code, e.message)
            yield event(anthropic_error(e.status_code, e.message))
        except (asyncio.CancelledError, GeneratorExit):
            tm_trace.error(rid, 499, "the client closed the connection")
            raise
        finally:
            await generator.aclose()
