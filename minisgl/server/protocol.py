"""The OpenAI API subset minisgl serves, as pydantic models with SGLang's names: what every endpoint shares.

Requests are strict about types ("0.5" is not a number) and refuse unknown fields, as OpenAI does; the fields
minisgl knows but does not support, and the ones SGLang's router adds, are in protocol_fields.py. Each
endpoint's own shapes live beside this module (protocol_chat.py, protocol_completion.py), the error body in
errors.py; `GenerateReqInput` here is what all of them become before the engine sees a request.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from minisgl.sampling.sampling_params import MAX_SEED, MAX_STOP_STRS
from minisgl.server.protocol_fields import (
    GenerateRouterFields,
    RequestModel,
    RouterFields,
    SGLangUnsupportedFields,
    refusing,
)

FinishReason = Literal["stop", "length", "abort", "tool_calls"]
StopStr = Annotated[str, Field(min_length=1)]
TokenId = Annotated[int, Field(ge=0)]


def unix_time() -> int:
    return int(time.time())


def new_id() -> str:
    return uuid.uuid4().hex


MAX_N = 16  # choices per request (n)
MAX_TOP_LOGPROBS = 20  # OpenAI's limit for chat's top_logprobs (completions allow 5)


class JsonSchemaFormat(RequestModel):
    name: str | None = None
    description: str | None = None
    schema_: dict[str, Any] = Field(alias="schema")
    strict: bool | None = None  # accepted: the grammar is always enforced


class ResponseFormat(RequestModel):
    """OpenAI's response_format: text (no constraint), json_object (any JSON object) or json_schema."""

    type: Literal["text", "json_object", "json_schema"]
    json_schema: JsonSchemaFormat | None = None

    @model_validator(mode="after")
    def _schema_given(self) -> ResponseFormat:
        if (self.type == "json_schema") != (self.json_schema is not None):
            raise ValueError("response_format: json_schema is given with type json_schema, and only then")
        return self

    def grammar(self) -> dict[str, str]:
        """As SGLang maps it onto the sampling params: a json_schema text (json_object: any object)."""
        if self.type == "json_object":
            return {"json_schema": '{"type": "object"}'}
        if self.type == "json_schema":
            return {"json_schema": json.dumps(self.json_schema.schema_)}
        return {}


class StreamOptions(RequestModel):
    include_usage: bool = False
    # accepted: minisgl never pads chunks, so there is nothing to turn off
    include_obfuscation: bool | None = None


class SamplingRequest(SGLangUnsupportedFields, RouterFields):
    """Fields shared by chat and text completions. None means "not given": the engine default applies, except
    max_tokens, which then runs to a stop token or the end of the context, as OpenAI does."""

    model: str | None = None
    max_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    top_k: int | None = Field(default=None, ge=-1)
    min_p: float | None = Field(default=None, ge=0.0, le=1.0)
    seed: int | None = Field(default=None, ge=0, lt=MAX_SEED)
    stop: StopStr | Annotated[list[StopStr], Field(max_length=MAX_STOP_STRS)] | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: int = Field(default=1, ge=1, le=MAX_N)  # choices: n copies of the request (parallel_sampling.py)
    presence_penalty: float | None = Field(default=None, ge=-2, le=2)
    frequency_penalty: float | None = Field(default=None, ge=-2, le=2)
    user: str | None = None  # accepted: it names the end user to OpenAI and changes nothing in the answer
    logit_bias: Any = None
    # structured output: OpenAI's response_format, and SGLang's regex, ebnf and json_schema (at most one)
    response_format: ResponseFormat | None = None
    regex: str | None = Field(default=None, min_length=1)
    ebnf: str | None = Field(default=None, min_length=1)
    json_schema: str | None = Field(default=None, min_length=1)
    # SGLang's extensions
    repetition_penalty: float | None = Field(default=None, gt=0, le=2)
    min_tokens: int | None = Field(default=None, ge=0)  # SGLang's name here; min_new_tokens in the engine
    ignore_eos: bool | None = None
    skip_special_tokens: bool | None = None
    stop_token_ids: list[TokenId] | None = Field(default=None, max_length=MAX_STOP_STRS)
    # SGLang's: the client names its request
    rid: str | None = Field(default=None, min_length=1, max_length=256)

    check_openai_unsupported = refusing("logit_bias")

    @field_validator("top_k")
    @classmethod
    def _top_k_not_zero(cls, value: int | None) -> int | None:
        if value == 0:
            raise ValueError("must be -1 (no limit) or at least 1")
        return value

    @model_validator(mode="after")
    def _one_grammar(self) -> SamplingRequest:
        given = [name for name in ("regex", "ebnf", "json_schema") if getattr(self, name) is not None]
        if self.response_format is not None and self.response_format.type != "text":
            given.append("response_format")
        if len(given) > 1:
            raise ValueError(f"{' and '.join(given)} are both given: a request takes one grammar at most")
        return self


def to_sampling_params_dict(request: SamplingRequest) -> dict[str, Any]:
    """Map an OpenAI request to the engine's sampling params, leaving out what the client did not set.

    max_new_tokens is always there: a missing max_tokens becomes None, "until the context is full" (the
    engine's own default, 128, is /generate's and the offline Engine's, as in SGLang)."""
    max_new_tokens = getattr(request, "max_completion_tokens", None)
    if max_new_tokens is None:
        max_new_tokens = request.max_tokens
    stop = [request.stop] if isinstance(request.stop, str) else request.stop
    params = {
        "temperature": request.temperature,
        "top_p": request.top_p,
        "top_k": request.top_k,
        "min_p": request.min_p,
        "seed": request.seed,
        "stop": stop,
        "ignore_eos": request.ignore_eos,
        "skip_special_tokens": request.skip_special_tokens,
        "stop_token_ids": request.stop_token_ids,
        "frequency_penalty": request.frequency_penalty,
        "presence_penalty": request.presence_penalty,
        "repetition_penalty": request.repetition_penalty,
        "min_new_tokens": request.min_tokens,
        "regex": request.regex,
        "ebnf": request.ebnf,
        "json_schema": request.json_schema,
    }
    given = {key: value for key, value in params.items() if value is not None}
    if request.response_format is not None:
        given.update(request.response_format.grammar())
    return {"max_new_tokens": max_new_tokens, **given}


class GenerateReqInput(SGLangUnsupportedFields, RouterFields, GenerateRouterFields):
    """SGLang's normalized request: what every endpoint turns its body into before the engine sees it, and
    the body of SGLang's native /generate.

    Logprobs as in SGLang: `return_logprob` adds each output token's log-probability to meta_info
    (output_token_logprobs), `top_logprobs_num` the most likely tokens at each position (output_top_logprobs),
    `return_text_in_logprobs` each token's text; `logprob_start_len` >= 0 the prompt's logprobs too, from that
    token on (input_token_logprobs; the prompt then runs whole, past the radix cache).
    """

    rid: str = Field(default_factory=new_id, min_length=1)
    text: str | None = None
    input_ids: list[TokenId] | None = None
    # chat turns from /v1/chat/completions: the TokenizerManager applies the chat template to them, with
    # the tools (OpenAI's function definitions) the template is given
    messages: list[dict[str, Any]] | None = None
    tools: list[dict[str, Any]] | None = None
    sampling_params: dict[str, Any] = Field(default_factory=dict)
    stream: bool = False
    return_logprob: bool = False
    top_logprobs_num: int = Field(default=0, ge=0, le=MAX_TOP_LOGPROBS)
    logprob_start_len: int = Field(default=-1, ge=-1)
    return_text_in_logprobs: bool = False

    @model_validator(mode="after")
    def _exactly_one_input(self) -> GenerateReqInput:
        given = [x for x in (self.text, self.input_ids, self.messages) if x is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of text or input_ids")
        return self


class AbortReqInput(RequestModel):
    """POST /abort_request: the request to stop, by the rid its client gave or the server assigned."""

    rid: str = Field(min_length=1)


class FlushCacheReqInput(RequestModel):
    """POST /flush_cache takes no arguments: an empty body, or an empty JSON object."""


class PauseGenerationInput(RequestModel):
    """POST /pause_generation (SGLang's): no batch runs until POST /continue_generation. minisgl has SGLang's
    mode "in_place" (each request stays where it is; new ones wait in the scheduler's queue, where SGLang's
    TokenizerManager holds them back); SGLang's default "abort" and "retract" are refused with a 400."""

    mode: str = Field("abort", validate_default=True)

    @field_validator("mode")
    @classmethod
    def _in_place_only(cls, value: str) -> str:
        if value != "in_place":
            raise ValueError(f'mode {value!r} is not supported: minisgl pauses with mode "in_place" only '
                             '(abort requests first with /abort_request if they must end)')
        return value


class PromptTokensDetails(BaseModel):
    cached_tokens: int = 0


class UsageInfo(BaseModel):
    """Token counts; cached_tokens shows how much of the prompt the radix cache saved."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    prompt_tokens_details: PromptTokensDetails | None = None

    @classmethod
    def of(cls, prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0) -> UsageInfo:
        return cls(
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            total_tokens=prompt_tokens + completion_tokens,
            prompt_tokens_details=PromptTokensDetails(cached_tokens=cached_tokens),
        )


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int = Field(default_factory=unix_time)
    owned_by: str = "minisgl"
    root: str | None = None
    max_model_len: int | None = None


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard] = Field(default_factory=list)
