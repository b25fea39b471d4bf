"""OpenAIServingCompletion: POST /v1/completions, one prompt given as text or as token ids, no template.
With `echo` the answer starts with the prompt's text (the first stream chunk carries it)."""

from __future__ import annotations

from typing import Any

from minisgl.server.logprobs import output_logprobs_of, to_completion_logprobs
from minisgl.server.protocol import GenerateReqInput, to_sampling_params_dict
from minisgl.server.protocol_completion import (
    CompletionRequest,
    CompletionResponse,
    CompletionResponseChoice,
    CompletionResponseStreamChoice,
    CompletionStreamResponse,
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


class OpenAIServingCompletion(OpenAIServingBase):
    request_cls = CompletionRequest
    endpoint = "/v1/completions"

    def _sampling_params(self, request: CompletionRequest) -> dict[str, Any]:
        return to_sampling_params_dict(request)

    def _convert_to_internal_request(self, request: CompletionRequest, rid: str) -> GenerateReqInput:
        prompt = ({"text": request.prompt} if isinstance(request.prompt, str)
                  else {"input_ids": request.prompt})
        return GenerateReqInput(rid=rid, sampling_params=to_sampling_params_dict(request),
                                stream=request.stream, return_logprob=request.logprobs is not None,
                                top_logprobs_num=request.logprobs or 0, return_text_in_logprobs=True,
                                logprob_start_len=0 if self._echo_logprobs(request) else -1, **prompt)

    @staticmethod
    def _echo_logprobs(request: CompletionRequest) -> bool:
        return request.echo and request.logprobs is not None

    def _split_prompts(self, request: CompletionRequest) -> list[CompletionRequest]:
        prompts = request.prompts
        return [request] if len(prompts) == 1 else [request.model_copy(update={"prompt": p}) for p in prompts]

    def _echo(self, request: CompletionRequest) -> str:
        """The prompt's text, put before the answer with `echo`; a prompt of token ids is decoded."""
        if not request.echo:
            return ""
        if isinstance(request.prompt, str):
            return request.prompt
        return self.tokenizer_manager.tokenizer.decode(request.prompt)

    def _logprobs(self, out: dict[str, Any], request: CompletionRequest, text_offset: int,
                  with_prompt: bool = False) -> dict[str, Any] | None:
        """The output's logprobs; with_prompt (echo and logprobs, the first piece), the prompt's first."""
        if request.logprobs is None:
            return None
        tokens, tops = output_logprobs_of(out, self.tokenizer_manager.tokenizer)
        if with_prompt:
            meta = out["meta_info"]
            tokens = list(meta.get("input_token_logprobs", ())) + tokens
            tops = list(meta.get("input_top_logprobs", ())) + tops
        return to_completion_logprobs(tokens, tops, text_offset)

    def _build_response(self, out: dict[str, Any], request: CompletionRequest) -> dict[str, Any]:
        meta = out["meta_info"]
        choice = CompletionResponseChoice(text=self._echo(request) + out["text"],
                                          logprobs=self._logprobs(out, request, 0,
                                                                  self._echo_logprobs(request)),
                                          finish_reason=finish_reason_of(meta),
                                          matched_stop=matched_stop_of(meta))
        response = CompletionResponse(id=f"cmpl-{meta['id']}", model=self.served_model_name, choices=[choice],
                                      usage=usage_of(meta))
        return with_warning(response.model_dump(mode="json"), meta)

    def _stream_chunks(self, out: dict[str, Any], request: CompletionRequest, first: bool) -> list[Chunk]:
        meta = out["meta_info"]
        chunk_id = f"cmpl-{meta['id']}"

        def chunk(text: str, **choice: Any) -> dict[str, Any]:
            stream_choice = CompletionResponseStreamChoice(text=text, **choice)
            return dump_chunk(CompletionStreamResponse(id=chunk_id, model=self.served_model_name,
                                                       choices=[stream_choice]))

        chunks: list[Chunk] = []
        text = (self._echo(request) if first else "") + out["delta"]
        echoed = len(self._echo(request)) if not first else 0  # offsets count the echoed prompt too
        logprobs = self._logprobs(out, request, echoed + len(out["text"]) - len(out["delta"]),
                                  first and self._echo_logprobs(request))
        if text or (logprobs and logprobs["tokens"]):
            # the trace records the generated text only: an echoed prompt is sent, not generated
            chunks.append((chunk(text, logprobs=logprobs), out["delta"]))
        if meta["finish_reason"] is not None:
            last = chunk("", finish_reason=finish_reason_of(meta), matched_stop=matched_stop_of(meta))
            chunks.append((with_warning(last, meta), ""))
            if request.stream_options is not None and request.stream_options.include_usage:
                usage = CompletionStreamResponse(id=chunk_id, model=self.served_model_name, choices=[],
                                                 usage=usage_of(meta))
                chunks.append((dump_chunk(usage), ""))
        return chunks
