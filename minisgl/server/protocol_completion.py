"""POST /v1/completions: one prompt as text or token ids, and the response, whole or streamed."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from minisgl.server.protocol import FinishReason, SamplingRequest, TokenId, UsageInfo, new_id, unix_time
from minisgl.server.protocol_fields import refusing

MAX_COMPLETION_LOGPROBS = 5  # OpenAI's limit for the legacy endpoint
MAX_PROMPTS = 64  # prompts in one request


class CompletionRequest(SamplingRequest):
    """POST /v1/completions with a single prompt, given as text or as token ids.

    `logprobs` (0..5) asks for each output token's log-probability and the `logprobs` most likely tokens at
    each position; `echo` puts the prompt's text before the answer. Both together give the prompt tokens'
    logprobs too (the first token's is null), what evaluation harnesses score answers with."""

    prompt: str | list[TokenId] | list[str] | list[list[TokenId]]
    logprobs: int | None = Field(default=None, ge=0, le=MAX_COMPLETION_LOGPROBS)
    echo: bool = False
    best_of: Any = None
    suffix: Any = None

    check_completion_unsupported = refusing("best_of", "suffix")

    @field_validator("prompt")
    @classmethod
    def _prompts(cls, value: Any) -> Any:
        """One prompt (text or token ids) or a list of them (one answer each); a list of one is one."""
        if not value:
            raise ValueError("must not be empty")
        if isinstance(value, list) and isinstance(value[0], (str, list)):
            if len(value) > MAX_PROMPTS:
                raise ValueError(f"got {len(value)} prompts; at most {MAX_PROMPTS} in one request")
            if not all(value):
                raise ValueError("a prompt in the list is empty")
            return value[0] if len(value) == 1 else value
        return value

    @property
    def prompts(self) -> list[str | list[int]]:
        several = isinstance(self.prompt, list) and isinstance(self.prompt[0], (str, list))
        return list(self.prompt) if several else [self.prompt]


class CompletionResponseChoice(BaseModel):
    index: int = 0
    text: str
    logprobs: dict[str, Any] | None = None  # tokens, token_logprobs, top_logprobs, text_offset
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
    logprobs: dict[str, Any] | None = None  # tokens, token_logprobs, top_logprobs, text_offset
    finish_reason: FinishReason | None = None
    matched_stop: int | str | None = None


class CompletionStreamResponse(BaseModel):
    id: str
    object: Literal["text_completion"] = "text_completion"
    created: int = Field(default_factory=unix_time)
    model: str
    choices: list[CompletionResponseStreamChoice]
    usage: UsageInfo | None = None
