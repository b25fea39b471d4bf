"""OpenAIServingChat: POST /v1/chat/completions. Messages go to the TokenizerManager as they are; it applies
the model's chat template (with the request's tools), exactly as the offline Engine does, so both give the
same answer.

The answer's text is then split, as SGLang's serving_chat does: with --reasoning-parser, a <think> block
becomes reasoning_content; with tools, the calls in the text become tool_calls (finish_reason tool_calls).
tool_choice "auto" finds them with --tool-call-parser; "required" or a named function makes the model write
them as a JSON array, enforced by a grammar (chat_tools.py), so any model calls a tool then.
"""

from __future__ import annotations

from typing import Any

from minisgl.server.chat_tools import ChatOutputSplitter, forced_tool_schema
from minisgl.server.logprobs import output_logprobs_of, to_chat_logprobs
from minisgl.server.protocol import GenerateReqInput, to_sampling_params_dict
from minisgl.server.protocol_chat import (
    ChatCompletionRequest,
    ChatCompletionResponse,
    ChatCompletionResponseChoice,
    ChatCompletionResponseStreamChoice,
    ChatCompletionStreamResponse,
    ChatMessage,
    ChoiceDelta,
)
from minisgl.server.serving_base import (
    Chunk,
    OpenAIServingBase,
    dump_chunk,
    finish_reason_of,
    matched_stop_of,
    usage_of,
    with_warning,
)


class OpenAIServingChat(OpenAIServingBase):
    request_cls = ChatCompletionRequest
    endpoint = "/v1/chat/completions"

    def _sampling_params(self, request: ChatCompletionRequest) -> dict[str, Any]:
        return to_sampling_params_dict(request)

    def _convert_to_internal_request(self, request: ChatCompletionRequest, rid: str) -> GenerateReqInput:
        messages = [m.for_template() for m in request.messages]
        params = to_sampling_params_dict(request)
        schema = forced_tool_schema(request)
        if schema is not None:
            params["json_schema"] = schema
        tools = ([t.model_dump(exclude_none=True) for t in request.tools]
                 if request.tools and request.tool_choice != "none" else None)
        return GenerateReqInput(rid=rid, messages=messages, tools=tools, sampling_params=params,
                                stream=request.stream, return_logprob=request.logprobs,
                                top_logprobs_num=request.top_logprobs or 0, return_text_in_logprobs=True)

    def _splitter(self, request: ChatCompletionRequest) -> ChatOutputSplitter:
        tm = self.tokenizer_manager
        return ChatOutputSplitter(request, tm.tool_call_parser, tm.reasoning_parser)

    def _logprobs(self, out: dict[str, Any], request: ChatCompletionRequest) -> dict[str, Any] | None:
        if not request.logprobs:
            return None
        return to_chat_logprobs(*output_logprobs_of(out, self.tokenizer_manager.tokenizer))

    def _build_response(self, out: dict[str, Any], request: ChatCompletionRequest) -> dict[str, Any]:
        meta = out["meta_info"]
        reasoning, content, calls = self._splitter(request).split_whole(out["text"])
        finish = finish_reason_of(meta)
        choice = ChatCompletionResponseChoice(
            message=ChatMessage(content=content, tool_calls=calls or None, reasoning_content=reasoning),
            logprobs=self._logprobs(out, request),
            finish_reason="tool_calls" if calls and finish == "stop" else finish,
            matched_stop=matched_stop_of(meta))
        response = ChatCompletionResponse(id=f"chatcmpl-{meta['id']}", model=self.served_model_name,
                                          choices=[choice], usage=usage_of(meta))
        return with_warning(response.model_dump(mode="json"), meta)

    def _stream_chunks(self, out: dict[str, Any], request: ChatCompletionRequest, first: bool) -> list[Chunk]:
        meta = out["meta_info"]
        chunk_id = f"chatcmpl-{meta['id']}"

        def chunk(delta: ChoiceDelta, **choice: Any) -> dict[str, Any]:
            stream_choice = ChatCompletionResponseStreamChoice(delta=delta, **choice)
            return dump_chunk(ChatCompletionStreamResponse(id=chunk_id, model=self.served_model_name,
                                                           choices=[stream_choice]))

        chunks: list[Chunk] = []
        if first:  # OpenAI opens every stream with the role
            request._splitter = self._splitter(request)
            chunks.append((chunk(ChoiceDelta(role="assistant", content="")), ""))
        splitter: ChatOutputSplitter = request._splitter
        finished = meta["finish_reason"] is not None
        reasoning, content, calls = splitter.split_piece(out["delta"], finished)
        # the trace counts the generated text once, on the first chunk sent (a held-back piece waits for one)
        generated, splitter.trace_pending = splitter.trace_pending + out["delta"], ""
        if reasoning:
            chunks.append((chunk(ChoiceDelta(reasoning_content=reasoning)), generated))
            generated = ""
        logprobs = self._logprobs(out, request)
        if content or (logprobs and logprobs["content"]):
            chunks.append((chunk(ChoiceDelta(content=content), logprobs=logprobs), generated))
            generated = ""
        for call in calls:
            chunks.append((chunk(ChoiceDelta(tool_calls=[call])), generated))
            generated = ""
        if finished:
            reason = finish_reason_of(meta)
            last = chunk(ChoiceDelta(), matched_stop=matched_stop_of(meta),
                         finish_reason="tool_calls" if splitter.made_calls and reason == "stop" else reason)
            chunks.append((with_warning(last, meta), generated))
            if request.stream_options is not None and request.stream_options.include_usage:
                usage = ChatCompletionStreamResponse(id=chunk_id, model=self.served_model_name, choices=[],
                                                     usage=usage_of(meta))
                chunks.append((dump_chunk(usage), ""))
        elif generated:  # all of it held back (a tag, a call not yet whole): counted with the next chunk
            splitter.trace_pending = generated
        return chunks
