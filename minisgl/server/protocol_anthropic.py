"""Anthropic's Messages API (POST /v1/messages), the subset minisgl serves, with SGLang's names
(sglang/srt/entrypoints/anthropic/protocol.py): text content blocks, a system prompt, max_tokens,
stop_sequences, temperature, top_p, top_k, streaming. Tools and extended thinking need a tool-call or
reasoning parser, which minisgl does not have: they are refused by name, as is every other content block."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from minisgl.server.protocol import StopStr, new_id
from minisgl.server.protocol_fields import RequestModel, refusing


class AnthropicTextBlock(RequestModel):
    type: Literal["text"]
    text: str
    cache_control: dict[str, Any] | None = None  # accepted: the radix cache shares prefixes by itself
    citations: Any = None

    check_unsupported = refusing("citations")


def _text_blocks(value: Any, where: str) -> Any:
    """A list of content blocks must hold text blocks only: name the first other type."""
    if isinstance(value, list):
        for i, block in enumerate(value):
            kind = block.get("type") if isinstance(block, dict) else type(block).__name__
            if kind != "text":
                raise ValueError(f"{where}[{i}] is a {kind!r} block: minisgl takes only text blocks")
    return value


class AnthropicMessage(RequestModel):
    role: Literal["user", "assistant"]
    content: str | list[AnthropicTextBlock]

    @field_validator("content", mode="before")
    @classmethod
    def _only_text(cls, value: Any) -> Any:
        return _text_blocks(value, "content")

    def text(self) -> str:
        return self.content if isinstance(self.content, str) else "".join(b.text for b in self.content)


class AnthropicMessagesRequest(RequestModel):
    model: str | None = None
    messages: list[AnthropicMessage] = Field(min_length=1)
    max_tokens: int = Field(ge=1)
    system: str | list[AnthropicTextBlock] | None = None
    stop_sequences: list[StopStr] | None = Field(default=None, max_length=16)
    temperature: float | None = Field(default=None, ge=0, le=1)
    top_p: float | None = Field(default=None, gt=0, le=1)
    top_k: int | None = Field(default=None, ge=1)
    stream: bool = False
    metadata: dict[str, Any] | None = None  # accepted: the caller's user id changes nothing in the answer
    tools: Any = None
    tool_choice: Any = None
    thinking: Any = None
    service_tier: Any = None
    container: Any = None
    mcp_servers: Any = None

    check_unsupported = refusing("tools", "tool_choice", "thinking", "service_tier", "container",
                                 "mcp_servers")

    @field_validator("system", mode="before")
    @classmethod
    def _system_text_only(cls, value: Any) -> Any:
        return _text_blocks(value, "system")

    def system_text(self) -> str | None:
        if self.system is None or isinstance(self.system, str):
            return self.system
        return "\n".join(b.text for b in self.system)


class AnthropicUsage(BaseModel):
    input_tokens: int
    output_tokens: int
    cache_read_input_tokens: int | None = None  # prompt tokens the radix cache served


class AnthropicMessagesResponse(BaseModel):
    id: str = Field(default_factory=lambda: f"msg_{new_id()}")
    type: Literal["message"] = "message"
    role: Literal["assistant"] = "assistant"
    model: str
    content: list[dict[str, Any]]
    stop_reason: Literal["end_turn", "max_tokens", "stop_sequence"] | None
    stop_sequence: str | None = None
    usage: AnthropicUsage
