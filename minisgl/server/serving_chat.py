"""OpenAIServingChat: POST /v1/chat/completions. Messages go to the TokenizerManager as they are; it applies
the model's chat template, exactly as the offline Engine does, so both give the same answer."""

from __future__ import annotations

from typing import Any

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
        messages = [{"role": m.role, "content": m.text()} for m in request.messages]
        return GenerateReqInput(rid=rid, messages=messages, sampling_params=to_sampling_params_dict(request),
                                stream=request.stream, return_logprob=request.logprobs,
                                top_logprobs_num=request.top_logprobs or 0, return_text_in_logprobs=True)

    def _logprobs(self, out: dict[str, Any], request: ChatCompletionRequest) -> dict[str, Any] | None:
        if not request.logprobs:
            return None
        return to_chat_logprobs(*output_logprobs_of(out, self.tokenizer_manager.tokenizer))

    def _build_response(self, out: dict[str, Any], request: ChatCompletionRequest) -> dict[str, Any]:
        meta = out["meta_info"]
        choice = ChatCompletionResponseChoice(message=ChatMessage(content=out["text"]),
                                              logprobs=self._logprobs(out, request),
                                              finish_reason=finish_reason_of(meta),
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
            chunks.append((chunk(ChoiceDelta(role="assistant", content="")), ""))
        logprobs = self._logprobs(out, request)
        if out["delta"] or (logprobs and logprobs["content"]):
            chunks.append((chunk(ChoiceDelta(content=out["delta"]), logprobs=logprobs), out["delta"]))
        if meta["finish_reason"] is not None:
            last = chunk(ChoiceDelta(), finish_reason=finish_reason_of(meta),
                         matched_stop=matched_stop_of(meta))
            chunks.append((with_warning(last, meta), ""))
            if request.stream_options is not None and request.stream_options.include_usage:
                usage = ChatCompletionStreamResponse(id=chunk_id, model=self.served_model_name, choices=[],
                                                     usage=usage_of(meta))
                chunks.append((dump_chunk(usage), ""))
        return chunks
