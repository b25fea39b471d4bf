"""The OpenAI API subset minisgl serves, as pydantic models with SGLang's names: what every endpoint shares.

Requests are strict about types ("0.5" is not a number) but ignore unknown fields, as OpenAI does. Each
endpoint's own shapes live beside this module (protocol_chat.py, protocol_completion.py), the error body in
errors.py; `GenerateReqInput` here is what all of them become before the engine sees a request.
"""

from __future__ import annotations

import time
import uuid
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from minisgl.sampling.sampling_params import MAX_SEED, MAX_STOP_STRS

FinishReason = Literal["stop", "length", "abort"]
StopStr = Annotated[str, Field(min_length=1)]
TokenId = Annotated[int, Field(ge=0)]


def unix_time() -> int:
    return int(time.time())


def new_id() -> str:
    return uuid.uuid4().hex


class RequestModel(BaseModel):
    """Base for what clients send: strict types so mistakes fail loudly, unknown fields dropped."""

    model_config = ConfigDict(strict=True, extra="ignore", allow_inf_nan=False)


class StreamOptions(RequestModel):
    include_usage: bool = False


class SamplingRequest(RequestModel):
    """Fields shared by chat and text completions. None means "not given": the engine default applies."""

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
    n: int = 1
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    user: str | None = None
    ignore_eos: bool | None = None
    skip_special_tokens: bool | None = None
    rid: str | None = Field(default=None, min_length=1, max_length=256)  # SGLang's: the client names its request

    @field_validator("top_k")
    @classmethod
    def _top_k_not_zero(cls, value: int | None) -> int | None:
        if value == 0:
            raise ValueError("must be -1 (no limit) or at least 1")
        return value

    @field_validator("n")
    @classmethod
    def _only_one_choice(cls, value: int) -> int:
        if value != 1:
            raise ValueError(f"only n=1 is supported, got {value}: minisgl returns exactly one choice")
        return value

    @field_validator("presence_penalty", "frequency_penalty")
    @classmethod
    def _no_penalties(cls, value: float) -> float:
        if value != 0:
            raise ValueError("penalties are not supported by minisgl, so the value must be 0")
        return value


def to_sampling_params_dict(request: SamplingRequest) -> dict[str, Any]:
    """Map an OpenAI request to the engine's sampling params, leaving out what the client did not set."""
    max_new_tokens = getattr(request, "max_completion_tokens", None)
    if max_new_tokens is None:
        max_new_tokens = request.max_tokens
    stop = [request.stop] if isinstance(request.stop, str) else request.stop
    params = {
        "max_new_tokens": max_new_tokens,
        "temperature": request.temperature,
        "top_p": request.top_p,
        "top_k": request.top_k,
        "min_p": request.min_p,
        "seed": request.seed,
        "stop": stop,
        "ignore_eos": request.ignore_eos,
        "skip_special_tokens": request.skip_special_tokens,
    }
    return {key: value for key, value in params.items() if value is not None}


class GenerateReqInput(RequestModel):
    """SGLang's normalized request: what every endpoint turns its body into before the engine sees it."""

    rid: str = Field(default_factory=new_id, min_length=1)
    text: str | None = None
    input_ids: list[TokenId] | None = None
    # chat turns from /v1/chat/completions: the TokenizerManager applies the chat template to them
    messages: list[dict[str, Any]] | None = None
    sampling_params: dict[str, Any] = Field(default_factory=dict)
    stream: bool = False

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
    """POST /flush_cache takes no arguments: an empty body, or a JSON object (its fields are ignored)."""


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
