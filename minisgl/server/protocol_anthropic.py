"""Anthropic's Messages API (POST /v1/messages), the subset minisgl serves, with SGLang's names
(sglang/srt/entrypoints/anthropic/protocol.py): text content blocks, a system prompt, max_tokens,
stop_sequences, temperature, top_p, top_k, streaming, and tool use (`tools`, `tool_choice`, `tool_use` and
`tool_result` blocks), which serving_anthropic.py maps onto the chat endpoint's tools as SGLang does.
Extended thinking and every other content block (images, documents) are refused by name."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, PrivateAttr, field_validator

from minisgl.server.protocol import StopStr, new_id
from minisgl.server.protocol_fields import RequestModel, refusing


class AnthropicTextBlock(RequestModel):
    type: Literal["text"]
    text: str
    cache_control: dict[str, Any] | None = None  # accepted: the radix cache shares prefixes by itself
    citations: Any = None

    check_unsupported = refusing("citations")


class AnthropicToolUseBlock(RequestModel):
    """A call an earlier assistant turn made."""

    type: Literal["tool_use"]
    id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    input: dict[str, Any]
    cache_control: dict[str, Any] | None = None


class AnthropicToolResultBlock(RequestModel):
    """The answer to a call, in a user turn."""

    type: Literal["tool_result"]
    tool_use_id: str = Field(min_length=1)
    content: str | list[AnthropicTextBlock] = ""
    is_error: bool | None = None  # accepted: the template sees the content either way
    cache_control: dict[str, Any] | None = None

    def text(self) -> str:
        return self.content if isinstance(self.content, str) else "".join(b.text for b in self.content)


BLOCK_TYPES = {"text", "tool_use", "tool_result"}


def _known_blocks(value: Any, where: str, allowed: set[str]) -> Any:
    """A list of content blocks may hold only the allowed types: name the first other type."""
    if isinstance(value, list):
        for i, block in enumerate(value):
            kind = block.get("type") if isinstance(block, dict) else type(block).__name__
            if kind not in allowed:
                raise ValueError(f"{where}[{i}] is a {kind!r} block: minisgl takes only "
                                 f"{', '.join(sorted(allowed))} blocks")
    return value


class AnthropicMessage(RequestModel):
    role: Literal["user", "assistant"]
    content: str | list[AnthropicTextBlock | AnthropicToolUseBlock | AnthropicToolResultBlock]

    @field_validator("content", mode="before")
    @classmethod
    def _known(cls, value: Any) -> Any:
        return _known_blocks(value, "content", BLOCK_TYPES)

    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        return "".join(b.text for b in self.content if isinstance(b, AnthropicTextBlock))

    def blocks(self, kind: type) -> list:
        return [] if isinstance(self.content, str) else [b for b in self.content if isinstance(b, kind)]


class AnthropicTool(RequestModel):
    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")
    description: str | None = None
    input_schema: dict[str, Any]
    cache_control: dict[str, Any] | None = None


class AnthropicToolChoice(RequestModel):
    type: Literal["auto", "any", "tool", "none"]
    name: str | None = None  # type tool: the tool
    disable_parallel_tool_use: bool | None = None


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
    tools: list[AnthropicTool] | None = None
    tool_choice: AnthropicToolChoice | None = None
    thinking: Any = None
    service_tier: Any = None
    container: Any = None
    mcp_servers: Any = None

    check_unsupported = refusing("thinking", "service_tier", "container", "mcp_servers")
    _chat: Any = PrivateAttr(default=None)  # the chat request it becomes (serving_anthropic.py)

    @field_validator("system", mode="before")
    @classmethod
    def _system_text_only(cls, value: Any) -> Any:
        return _known_blocks(value, "system", {"text"})

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
    stop_reason: Literal["end_turn", "max_tokens", "stop_sequence", "tool_use"] | None
    stop_sequence: str | None = None
    usage: AnthropicUsage
