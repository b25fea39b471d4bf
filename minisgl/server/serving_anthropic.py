"""AnthropicServing: POST /v1/messages, Anthropic's Messages API over the same engine path as the OpenAI
endpoints (SGLang's entrypoints/anthropic/serving.py translates to its chat completions the same way).

    system + messages (text blocks)      -> the chat template's messages, as /v1/chat/completions sends them
    max_tokens, stop_sequences, ...      -> max_new_tokens, stop, ...
    finish: stop token / stop string /   -> stop_reason end_turn / stop_sequence (with the string) /
            length                          max_tokens

Tool use rides on the chat endpoint's tools (serving_chat.py, chat_tools.py): `tools` become function
tools, `tool_choice` auto / any / tool / none becomes auto / required / named / none, `tool_use` blocks an
assistant turn's tool_calls and `tool_result` blocks `tool` turns; the calls found in the answer come back
as `tool_use` blocks (stop_reason tool_use).

A stream is Anthropic's named events: message_start, content_block_start, ping, a content_block_delta per
piece of text (input_json_delta pieces for a tool_use block), content_block_stop, message_delta
(stop_reason, usage), message_stop. Errors keep Anthropic's shape: {"type": "error", "error": {"type",
"message"}}, in the body or as an `error` event mid-stream.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi.responses import JSONResponse
from pydantic import ValidationError

from minisgl.server import tm_trace
from minisgl.server.errors import RequestError, format_validation_error
from minisgl.server.protocol import GenerateReqInput, new_id
from minisgl.server.protocol_anthropic import (
    AnthropicMessagesRequest,
    AnthropicMessagesResponse,
    AnthropicToolResultBlock,
    AnthropicToolUseBlock,
    AnthropicUsage,
)
from minisgl.server.protocol_chat import ChatCompletionRequest
from minisgl.server.serving_base import OpenAIServingBase
from minisgl.server.serving_chat import OpenAIServingChat

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


TOOL_CHOICE = {"auto": "auto", "any": "required", "none": "none"}  # and "tool": the named function


def to_chat_request(request: AnthropicMessagesRequest) -> ChatCompletionRequest:
    """The chat request SGLang's AnthropicServing makes of a Messages request: the system prompt a system
    turn, tool_result blocks `tool` turns, tool_use blocks an assistant turn's tool_calls."""
    messages: list[dict[str, Any]] = []
    if request.system_text() is not None:
        messages.append({"role": "system", "content": request.system_text()})
    for m in request.messages:
        for result in m.blocks(AnthropicToolResultBlock):
            messages.append({"role": "tool", "tool_call_id": result.tool_use_id, "content": result.text()})
        calls = [{"id": b.id, "type": "function",
                  "function": {"name": b.name, "arguments": json.dumps(b.input, ensure_ascii=False)}}
                 for b in m.blocks(AnthropicToolUseBlock)]
        text = m.text()
        if text or calls or not m.blocks(AnthropicToolResultBlock):
            messages.append({"role": m.role, "content": text if text or not calls else None,
                             **({"tool_calls": calls} if calls else {})})
    body: dict[str, Any] = {"messages": messages, "max_tokens": request.max_tokens,
                            "stream": request.stream, "temperature": request.temperature,
                            "top_p": request.top_p, "top_k": request.top_k, "stop": request.stop_sequences}
    if request.tools:
        body["tools"] = [{"type": "function", "function": {"name": t.name, "description": t.description,
                                                           "parameters": t.input_schema}}
                         for t in request.tools]
    choice = request.tool_choice
    if choice is not None:
        body["tool_choice"] = (TOOL_CHOICE.get(choice.type) if choice.type != "tool"
                               else {"type": "function", "function": {"name": choice.name or ""}})
        if choice.disable_parallel_tool_use:
            body["parallel_tool_calls"] = False
    try:
        return ChatCompletionRequest.model_validate({k: v for k, v in body.items() if v is not None})
    except ValidationError as e:
        raise RequestError(format_validation_error(e).error.message) from None


def tool_use(call: dict[str, Any]) -> dict[str, Any]:
    """A chat tool call as Anthropic's tool_use block."""
    function = call["function"]
    try:
        arguments = json.loads(function["arguments"])
    except ValueError:
        arguments = {}
    return {"type": "tool_use", "id": call["id"].replace("call_", "toolu_", 1), "name": function["name"],
            "input": arguments}


def sse_event(payload: dict[str, Any]) -> str:
    return f"event: {payload['type']}\ndata: {json.dumps(payload, ensure_ascii=False)}\n\n"


class AnthropicServing(OpenAIServingBase):
    request_cls = AnthropicMessagesRequest
    endpoint = "/v1/messages"

    def _sampling_params(self, request: AnthropicMessagesRequest) -> dict[str, Any]:
        params = {"temperature": request.temperature, "top_p": request.top_p, "top_k": request.top_k,
                  "stop": request.stop_sequences}
        return {"max_new_tokens": request.max_tokens, **{k: v for k, v in params.items() if v is not None}}

    def __init__(self, tokenizer_manager, served_model_name: str):
        super().__init__(tokenizer_manager, served_model_name)
        self.chat = OpenAIServingChat(tokenizer_manager, served_model_name)

    def _convert_to_internal_request(self, request: AnthropicMessagesRequest, rid: str) -> GenerateReqInput:
        request._chat = to_chat_request(request)
        return self.chat._convert_to_internal_request(request._chat, rid)

    def _error_response(self, e: RequestError) -> JSONResponse:
        return JSONResponse(anthropic_error(e.status_code, e.message), status_code=e.status_code)

    def _build_response(self, out: dict[str, Any], request: AnthropicMessagesRequest) -> dict[str, Any]:
        meta = out["meta_info"]
        stop_reason, stop_sequence = stop_reason_of(meta)
        _, text, calls = self.chat._splitter(request._chat).split_whole(out["text"])
        content = [{"type": "text", "text": text}] if text or not calls else []
        content += [tool_use(c) for c in calls]
        if calls and stop_reason == "end_turn":
            stop_reason = "tool_use"
        response = AnthropicMessagesResponse(id=f"msg_{meta['id']}", model=self.served_model_name,
                                             content=content, stop_reason=stop_reason,
                                             stop_sequence=stop_sequence, usage=usage_of(meta))
        return response.model_dump(mode="json")

    async def _generate_stream(self, first: dict[str, Any], generator: AsyncIterator[dict[str, Any]],
                               request: AnthropicMessagesRequest, rid: str) -> AsyncIterator[str]:
        index, out = 0, first
        splitter = self.chat._splitter(request._chat)
        block, block_kind = 0, "text"  # the content block open now
        pending = ""  # generated text no event has carried yet: the trace counts it on the next one

        def event(payload: dict[str, Any]) -> str:
            nonlocal index, pending
            data = sse_event(payload)
            tm_trace.sse_chunk(rid, index, pending, data)
            index, pending = index + 1, ""
            return data

        def pieces(text: str, calls: list[dict[str, Any]]) -> list[str]:
            """The events of a piece of the answer: text deltas, and tool_use blocks opened and filled."""
            nonlocal block, block_kind
            events = []
            if text:
                if block_kind != "text":
                    events.append(event({"type": "content_block_stop", "index": block}))
                    block, block_kind = block + 1, "text"
                    events.append(event({"type": "content_block_start", "index": block,
                                         "content_block": {"type": "text", "text": ""}}))
                events.append(event({"type": "content_block_delta", "index": block,
                                     "delta": {"type": "text_delta", "text": text}}))
            for call in calls:
                arguments = call["function"]["arguments"]
                if "id" in call:  # a call's first piece: a tool_use block of its own
                    events.append(event({"type": "content_block_stop", "index": block}))
                    block, block_kind = block + 1, "tool_use"
                    start = tool_use({**call, "function": {**call["function"], "arguments": "{}"}})
                    events.append(event({"type": "content_block_start", "index": block,
                                         "content_block": start}))
                if arguments:
                    events.append(event({"type": "content_block_delta", "index": block,
                                         "delta": {"type": "input_json_delta", "partial_json": arguments}}))
            return events

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
                meta = out["meta_info"]
                finished = meta["finish_reason"] is not None
                pending += out["delta"]
                _, text, calls = splitter.split_piece(out["delta"], finished)
                for data in pieces(text, calls):
                    yield data
                if finished:
                    break
                out = await generator.__anext__()
            stop_reason, stop_sequence = stop_reason_of(meta)
            if splitter.made_calls and stop_reason == "end_turn":
                stop_reason = "tool_use"
            yield event({"type": "content_block_stop", "index": block})
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
