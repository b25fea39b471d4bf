"""POST /v1/chat/completions: the request (chat turns plus sampling fields) and the response, whole or
streamed."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationInfo, field_validator

from minisgl.server.protocol import (
    MAX_TOP_LOGPROBS,
    FinishReason,
    RequestModel,
    SamplingRequest,
    UsageInfo,
    new_id,
    unix_time,
)
from minisgl.server.protocol_fields import refusing


class ContentPart(RequestModel):
    """One part of a list-shaped message content; only text is supported."""

    type: Literal["text"]
    text: str


class ChatCompletionMessage(RequestModel):
    """One chat turn; content may be a string or a list of text parts, as OpenAI allows."""

    role: Literal["system", "user", "assistant"]
    content: str | list[ContentPart]
    # OpenAI's, for tools, audio and named participants: refused
    name: Any = None
    tool_calls: Any = None
    tool_call_id: Any = None
    function_call: Any = None
    refusal: Any = None
    audio: Any = None

    check_unsupported = refusing("name", "tool_calls", "tool_call_id", "function_call", "refusal", "audio")

    def text(self) -> str:
        """The content as one string, so the chat template never sees the list form."""
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text for part in self.content)


class ChatCompletionRequest(SamplingRequest):
    """POST /v1/chat/completions. `max_completion_tokens` is OpenAI's newer name for `max_tokens`.

    `logprobs` asks for each output token's log-probability, `top_logprobs` (0..20, needs logprobs) for the
    most likely tokens at each position too; `response_format` (SamplingRequest) makes the answer JSON. The
    rest of OpenAI's chat fields (tools, audio, stored completions...) are refused by name."""

    messages: list[ChatCompletionMessage] = Field(min_length=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    logprobs: bool = False
    top_logprobs: int | None = Field(default=None, ge=0, le=MAX_TOP_LOGPROBS)
    safety_identifier: str | None = None  # accepted: like `user`, it changes nothing in the answer
    prompt_cache_key: str | None = None  # accepted: minisgl's radix cache shares prefixes without a key
    audio: Any = None
    function_call: Any = None
    functions: Any = None
    metadata: Any = None
    modalities: Any = None
    parallel_tool_calls: Any = None
    prediction: Any = None
    prompt_cache_retention: Any = None
    reasoning_effort: Any = None
    service_tier: Any = None
    store: Any = None
    tool_choice: Any = None
    tools: Any = None
    verbosity: Any = None
    web_search_options: Any = None
    # SGLang's chat extensions minisgl does not implement
    chat_template_kwargs: Any = None
    continue_final_message: Any = None
    separate_reasoning: Any = None
    stream_reasoning: Any = None

    check_chat_unsupported = refusing(
        "audio", "function_call", "functions", "metadata", "modalities", "parallel_tool_calls", "prediction",
        "prompt_cache_retention", "reasoning_effort", "service_tier", "store",
        "tool_choice", "tools", "verbosity", "web_search_options", "chat_template_kwargs",
        "continue_final_message", "separate_reasoning", "stream_reasoning")

    @field_validator("top_logprobs")
    @classmethod
    def _top_logprobs_needs_logprobs(cls, value: int | None, info: ValidationInfo) -> int | None:
        if value and not info.data.get("logprobs"):
            raise ValueError("top_logprobs needs logprobs set to true")
        return value


class ChatMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str


class ChatCompletionResponseChoice(BaseModel):
    index: int = 0
    message: ChatMessage
    logprobs: dict[str, Any] | None = None  # {"content": [...], "refusal": None}: see logprobs.py
    finish_reason: FinishReason | None = None
    matched_stop: int | str | None = None


class ChatCompletionResponse(BaseModel):
    id: str = Field(default_factory=lambda: f"chatcmpl-{new_id()}")
    object: Literal["chat.completion"] = "chat.completion"
    created: int = Field(default_factory=unix_time)
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
    logprobs: dict[str, Any] | None = None
    finish_reason: FinishReason | None = None
    matched_stop: int | str | None = None


class ChatCompletionStreamResponse(BaseModel):
    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int = Field(default_factory=unix_time)
    model: str
    choices: list[ChatCompletionResponseStreamChoice]
    usage: UsageInfo | None = None
