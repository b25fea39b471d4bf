"""ServingGenerate: SGLang's native POST /generate. The body already is a GenerateReqInput (text or
input_ids, plus engine sampling_params such as max_new_tokens); the answer carries SGLang's meta_info."""

from __future__ import annotations

from typing import Any

from minisgl.server.protocol import GenerateReqInput
from minisgl.server.serving_base import Chunk, OpenAIServingBase


class ServingGenerate(OpenAIServingBase):
    request_cls = GenerateReqInput
    endpoint = "/generate"

    def _new_rid(self, request: GenerateReqInput) -> str:
        if "rid" not in request.model_fields_set and (rid := self._room_rid(request)) is not None:
            request.rid = rid  # both halves of a PD-disaggregated request: serving_base.py
        return request.rid  # the client may choose it, e.g. to abort it later by name

    def _sampling_params(self, request: GenerateReqInput) -> dict[str, Any]:
        return request.sampling_params

    def _convert_to_internal_request(self, request: GenerateReqInput, rid: str) -> GenerateReqInput:
        return request

    def _build_response(self, out: dict[str, Any], request: GenerateReqInput) -> dict[str, Any]:
        return {"text": out["text"], "output_ids": out["output_ids"], "meta_info": out["meta_info"]}

    def _stream_chunks(self, out: dict[str, Any], request: GenerateReqInput, first: bool) -> list[Chunk]:
        # like SGLang, each chunk holds the whole text so far, not only the new piece
        return [(self._build_response(out, request), out["delta"])]
