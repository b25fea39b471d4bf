"""The OpenAI API subset minisgl serves, as pydantic models with SGLang's names.

Requests are strict about types ("0.5" is not a number) but ignore unknown fields, as OpenAI does.
"""

from __future__ import annotations

import time
import uuid
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from minisgl.sampling.sampling_params import MAX_SEED, MAX_STOP_STRS

FinishReason = Literal["stop", "length", "abort"]
StopStr = Annotated[str, Field(min_length=1)]
TokenId = Annotated[int, Field(ge=0)]


def _now() -> int:
    return int(time.time())


def _new_id() -> str:
    return uuid.uuid4().hex


class RequestModel(BaseModel):
    """Base for what clients send: strict types so mistakes fail loudly, unknown fields dropped."""

    model_config = ConfigDict(strict=True, extra="ignore", allow_inf_nan=False)


class ContentPart(RequestModel):
    """One part of a list-shaped message content; only text is supported."""

    type: Literal["text"]
    text: str


class ChatCompletionMessage(RequestModel):
    """One chat turn; content may be a string or a list of text parts, as OpenAI allows."""

    role: Literal["system", "user", "assistant"]
    content: str | list[ContentPart]

    def text(self) -> str:
        """The content as one string, so the chat template never sees the list form."""
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text for part in self.content)


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


class ChatCompletionRequest(SamplingRequest):
    """POST /v1/chat/completions. `max_completion_tokens` is OpenAI's newer name for `max_tokens`."""

    messages: list[ChatCompletionMessage] = Field(min_length=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)


class CompletionRequest(SamplingRequest):
    """POST /v1/completions with a single prompt, given as text or as token ids."""

    prompt: str | list[TokenId] | list[str]

    @field_validator("prompt")
    @classmethod
    def _single_prompt(cls, value: str | list[int] | list[str]) -> str | list[int]:
        if value and isinstance(value, list) and isinstance(value[0], str):
            if len(value) != 1:
                raise ValueError(f"got {len(value)} prompts; minisgl takes one prompt per request")
            value = value[0]
        if not value:
            raise ValueError("must not be empty")
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

    rid: str = Field(default_factory=_new_id, min_length=1)
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


class ChatMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str


class ChatCompletionResponseChoice(BaseModel):
    index: int = 0
    message: ChatMessage
    finish_reason: FinishReason | None = None
    matched_stop: int | str | None = None


class ChatCompletionResponse(BaseModel):
    id: str = Field(default_factory=lambda: f"chatcmpl-{_new_id()}")
    object: Literal["chat.completion"] = "chat.completion"
    created: int = Field(default_factory=_now)
    model: str
    choices: list[ChatCompletionResponseChoice]
    usage: UsageInfo


class ChoiceDelta(BaseModel):
    """The piece of the message a stream chunk adds (SGLang calls it DeltaMessage)."""

    role: Literal["assistant"] | None = None
    content: str | None = None


class ChatCompletionResponseStreamChoice(BaseModel):
    index: int = 0
    delta: ChoiceDelta
    finish_reason: FinishReason | None = None
    matched_stop: int | str | None = None


class ChatCompletionStreamResponse(BaseModel):
    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int = Field(default_factory=_now)
    model: str
    choices: list[ChatCompletionResponseStreamChoice]
    usage: UsageInfo | None = None


class CompletionResponseChoice(BaseModel):
    index: int = 0
    text: str
    logprobs: None = None
    finish_reason: FinishReason | None = None
    matched_stop: int | str | None = None


class CompletionResponse(BaseModel):
    id: str = Field(default_factory=lambda: f"cmpl-{_new_id()}")
    object: Literal["text_completion"] = "text_completion"
    created: int = Field(default_factory=_now)
    model: str
    choices: list[CompletionResponseChoice]
    usage: UsageInfo


class CompletionResponseStreamChoice(BaseModel):
    index: int = 0
    text: str
    logprobs: None = None
    finish_reason: FinishReason | None = None
    matched_stop: int | str | None = None


class CompletionStreamResponse(BaseModel):
    id: str
    object: Literal["text_completion"] = "text_completion"
    created: int = Field(default_factory=_now)
    model: str
    choices: list[CompletionResponseStreamChoice]
    usage: UsageInfo | None = None


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int = Field(default_factory=_now)
    owned_by: str = "minisgl"
    root: str | None = None
    max_model_len: int | None = None


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard] = Field(default_factory=list)


class ErrorDetail(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: str | int | None = None


class ErrorResponse(BaseModel):
    """Exactly OpenAI's error body, so client libraries raise their usual exceptions."""

    error: ErrorDetail

    @classmethod
    def make(
        cls,
        message: str,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | int | None = None,
    ) -> ErrorResponse:
        return cls(error=ErrorDetail(message=message, type=type, param=param, code=code))


def _is_union_tag(part: str) -> bool:
    """Pydantic puts the union member it tried ("str", "list[int]") into an error's location; no field."""
    return part in {"str", "int", "float", "bool"} or not part.isidentifier()


def _field_loc(loc: tuple[int | str, ...]) -> tuple[int | str, ...]:
    return tuple(part for part in loc if isinstance(part, int) or not _is_union_tag(part))


def _param_path(loc: tuple[int | str, ...]) -> str | None:
    """("messages", 0, "role") -> "messages[0].role", the way OpenAI names a nested param."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else part
    return path or None


def format_validation_error(exc: ValidationError) -> ErrorResponse:
    """One clear message for the first bad field, naming it in `param`.

    A union field fails once per member: the deepest failure is where the input really went wrong, a
    broken rule beats "wrong type" from members that never matched, and what is left is joined with "or".
    """
    errors = exc.errors()
    locs = [_field_loc(error["loc"]) for error in errors]
    deepest = max((loc for loc in locs if loc[:1] == locs[0][:1]), key=len)
    here = [error for loc, error in zip(locs, errors) if loc == deepest]
    rules = [error for error in here if not error["type"].endswith("_type")]
    messages: list[str] = []
    for error in rules or here:
        msg = error["msg"].removeprefix("Value error, ")
        if msg not in messages:
            messages.append(msg)
    joined = messages[0] + "".join(f" or {m.removeprefix('Input should be ')}" for m in messages[1:])
    param = _param_path(deepest)
    return ErrorResponse.make(f"{param}: {joined}" if param else joined, param=param)
