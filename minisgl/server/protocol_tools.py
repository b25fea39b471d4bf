"""OpenAI's tool fields on /v1/chat/completions: the functions a request offers (`tools`), which it wants
called (`tool_choice`), and the calls in the history (an assistant turn's `tool_calls`, a `tool` turn's
answer). serving_chat.py gives them to the chat template and turns the model's calls back into tool_calls.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import Field

from minisgl.server.protocol_fields import RequestModel


class FunctionDefinition(RequestModel):
    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")
    description: str | None = None
    parameters: dict[str, Any] | None = None  # a JSON schema of the arguments
    strict: bool | None = None  # accepted: tool_choice required or named always enforces the schema


class Tool(RequestModel):
    type: Literal["function"]
    function: FunctionDefinition


class ToolChoiceFunction(RequestModel):
    name: str = Field(min_length=1)


class ToolChoice(RequestModel):
    """tool_choice naming one function: the model must call it."""

    type: Literal["function"]
    function: ToolChoiceFunction


class ToolCallFunction(RequestModel):
    name: str = Field(min_length=1)
    arguments: str  # JSON text, as OpenAI sends it


class MessageToolCall(RequestModel):
    """A call an earlier assistant turn made (the history the client sends back)."""

    id: str
    type: Literal["function"] = "function"
    function: ToolCallFunction

    def for_template(self) -> dict[str, Any]:
        """Chat templates read a call's arguments as an object; OpenAI sends them as JSON text."""
        try:
            arguments = json.loads(self.function.arguments)
        except ValueError:
            arguments = self.function.arguments
        return {"id": self.id, "type": "function",
                "function": {"name": self.function.name, "arguments": arguments}}


def tool_call_json(index: int, call_id: str, name: str, arguments: str) -> dict[str, Any]:
    """A call in an answer, as OpenAI returns it (message.tool_calls, or a stream delta's first piece)."""
    return {"index": index, "id": call_id, "type": "function",
            "function": {"name": name, "arguments": arguments}}
