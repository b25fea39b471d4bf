"""POST /v1/chat/completions: the request (chat turns plus sampling fields) and the response, whole or
streamed."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, PrivateAttr, ValidationInfo, field_validator, model_validator

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
from minisgl.server.protocol_tools import MessageToolCall, Tool, ToolChoice


class ContentPart(RequestModel):
    """One part of a list-shaped message content; only text is supported."""

    type: Literal["text"]
    text: str


class ChatCompletionMessage(RequestModel):
    """One chat turn; content may be a string or a list of text parts, as OpenAI allows. An assistant turn
    may carry the tool calls it made (then content may be null); a `tool` turn answers one of them."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str | list[ContentPart] | None = None
    tool_calls: list[MessageToolCall] | None = None
    tool_call_id: str | None = None
    # OpenAI's, for audio and named participants: refused
    name: Any = None
    function_call: Any = None
    refusal: Any = None
    audio: Any = None

    check_unsupported = refusing("name", "function_call", "refusal", "audio")

    @model_validator(mode="after")
    def _fields_of_the_role(self) -> ChatCompletionMessage:
        if self.content is None and not (self.role == "assistant" and self.tool_calls):
            raise ValueError("content is needed (only an assistant turn with tool_calls may leave it null)")
        if self.tool_calls is not None and self.role != "assistant":
            raise ValueError("only an assistant turn has tool_calls")
        if (self.role == "tool") != (self.tool_call_id is not None):
            raise ValueError("a tool turn, and only a tool turn, has a tool_call_id")
        return self

    def text(self) -> str:
        """The content as one string, so the chat template never sees the list form."""
        if isinstance(self.content, str) or self.content is None:
            return self.content or ""
        return "".join(part.text for part in self.content)

    def for_template(self) -> dict[str, Any]:
        turn: dict[str, Any] = {"role": self.role, "content": self.text()}
        if self.tool_calls:
            turn["tool_calls"] = [call.for_template() for call in self.tool_calls]
        if self.tool_call_id is not None:
            turn["tool_call_id"] = self.tool_call_id
        return turn


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
    parallel_tool_calls: bool | None = None  # false: tool_choice required makes exactly one call
    prediction: Any = None
    prompt_cache_retention: Any = None
    reasoning_effort: Any = None
    service_tier: Any = None
    store: Any = None
    tools: list[Tool] | None = None
    tool_choice: Literal["none", "auto", "required"] | ToolChoice | None = None
    verbosity: Any = None
    web_search_options: Any = None
    # SGLang's, with --reasoning-parser: the reasoning apart (reasoning_content), and streamed as it comes
    separate_reasoning: bool = True
    stream_reasoning: bool = True
    # SGLang's chat extensions minisgl does not implement
    chat_template_kwargs: Any = None
    continue_final_message: Any = None

    _splitter: Any = PrivateAttr(default=None)  # a stream's parsers (serving_chat.py), one per request

    check_chat_unsupported = refusing(
        "audio", "function_call", "functions", "metadata", "modalities", "prediction",
        "prompt_cache_retention", "reasoning_effort", "service_tier", "store",
        "verbosity", "web_search_options", "chat_template_kwargs", "continue_final_message")

    @model_validator(mode="after")
    def _tool_choice_needs_its_tools(self) -> ChatCompletionRequest:
        choice = self.tool_choice
        if choice in (None, "none", "auto"):
            return self
        names = [tool.function.name for tool in self.tools or ()]
        if not names:
            raise ValueError("tool_choice asks for a tool call, but no tools are given")
        if isinstance(choice, ToolChoice) and choice.function.name not in names:
            raise ValueError(f"tool_choice names {choice.function.name!r}, which is not among the tools "
                             f"({', '.join(names)})")
        if self.response_format is not None or self.regex or self.ebnf or self.json_schema:
            raise ValueError("tool_choice required or named is enforced by a grammar of its own: leave out "
                             "response_format, regex, ebnf and json_schema")
        return self

    @field_validator("top_logprobs")
    @classmethod
    def _top_logprobs_needs_logprobs(cls, value: int | None, info: ValidationInfo) -> int | None:
        if value and not info.data.get("logprobs"):
            raise ValueError("top_logprobs needs logprobs set to true")
        return value


class ChatMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str | None
    tool_calls: list[dict[str, Any]] | None = None
    reasoning_content: str | None = None  # with --reasoning-parser


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
    tool_calls: list[dict[str, Any]] | None = None
    reasoning_content: str | None = None


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
