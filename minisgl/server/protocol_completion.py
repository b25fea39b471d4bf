"""POST /v1/completions: one prompt as text or token ids, and the response, whole or streamed."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, field_validator

from minisgl.server.protocol import FinishReason, SamplingRequest, TokenId, UsageInfo, new_id, unix_time


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


class CompletionResponseChoice(BaseModel):
    index: int = 0
    text: str
    logprobs: None = None
    finish_reason: FinishReason | None = None
    matched_stop: int | str | None = None


class CompletionResponse(BaseModel):
    id: str = Field(default_factory=lambda: f"cmpl-{new_id()}")
    object: Literal["text_completion"] = "text_completion"
    created: int = Field(default_factory=unix_time)
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
    created: int = Field(default_factory=unix_time)
    model: str
    choices: list[CompletionResponseStreamChoice]
    usage: UsageInfo | None = None
