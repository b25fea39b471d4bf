"""What a detector gives back (SGLang's function_call/core_types.py)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ToolCallItem:
    """One call, or in a stream one piece of it: the name once, then pieces of the arguments (JSON text)."""

    tool_index: int  # which call of the answer (0, 1, ...)
    name: str | None = None
    parameters: str = ""


@dataclass
class StreamingParseResult:
    normal_text: str = ""  # text outside any call: the answer's content
    calls: list[ToolCallItem] = field(default_factory=list)
