"""POST /v1/chat/completions: the request (chat turns plus sampling fields) and the response, whole or streamed."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from minisgl.server.protocol import FinishReason, RequestModel, SamplingRequest, UsageInfo, new_id, unix_time


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


class ChatCompletionRequest(SamplingRequest):
    """POST /v1/chat/completions. `max_completion_tokens` is OpenAI's newer name for `max_tokens`."""

    messages: list[ChatCompletionMessage] = Field(min_length=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)


class ChatMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str


class ChatCompletionResponseChoice(BaseModel):
    index: int = 0
    message: ChatMessage
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
    finish_reason: FinishReason | None = None
    matched_stop: int | str | None = None


class ChatCompletionStreamResponse(BaseModel):
    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int = Field(default_factory=unix_time)
    model: str
    choices: list[ChatCompletionResponseStreamChoice]
    usage: UsageInfo | None = None
