"""FunctionCallParser (SGLang's function_call/function_call_parser.py): the detector --tool-call-parser
names, over a whole answer or a stream; and the JSON schema that makes the model call a tool when
tool_choice is "required" or names one (SGLang's get_json_schema_constraint)."""

from __future__ import annotations

from typing import Any

from minisgl.function_call.core_types import StreamingParseResult
from minisgl.function_call.pythonic_detector import PythonicDetector
from minisgl.function_call.qwen25_detector import Qwen25Detector

ToolCallParserEnum = {"qwen25": Qwen25Detector, "hermes": Qwen25Detector, "pythonic": PythonicDetector}


class FunctionCallParser:
    def __init__(self, tool_call_parser: str):
        if tool_call_parser not in ToolCallParserEnum:
            raise ValueError(f"unknown tool call parser {tool_call_parser!r}; there are: "
                             f"{', '.join(ToolCallParserEnum)}")
        self.detector = ToolCallParserEnum[tool_call_parser]()

    def has_tool_call(self, text: str) -> bool:
        return self.detector.has_tool_call(text)

    def parse_non_stream(self, text: str) -> StreamingParseResult:
        return self.detector.detect_and_parse(text)

    def parse_stream_chunk(self, chunk_text: str) -> StreamingParseResult:
        return self.detector.parse_streaming_increment(chunk_text)

    def flush(self) -> StreamingParseResult:
        return self.detector.flush()


def get_json_schema_constraint(tools: list[dict[str, Any]], tool_choice: Any) -> dict[str, Any] | None:
    """tool_choice "required": a JSON array of at least one call of any tool; a named function: exactly one
    call of it. Each call is {"name": ..., "parameters": {...}} with the tool's own parameter schema."""
    def call_of(function: dict[str, Any]) -> dict[str, Any]:
        parameters = function.get("parameters") or {"type": "object"}
        name = {"type": "string", "enum": [function["name"]]}
        return {"type": "object", "required": ["name", "parameters"],
                "properties": {"name": name, "parameters": parameters}}

    functions = [tool["function"] for tool in tools]
    if tool_choice == "required":
        return {"type": "array", "minItems": 1, "items": {"anyOf": [call_of(f) for f in functions]}}
    if isinstance(tool_choice, dict):
        name = tool_choice["function"]["name"]
        chosen = [f for f in functions if f["name"] == name]
        return {"type": "array", "minItems": 1, "maxItems": 1, "items": call_of(chosen[0])}
    return None
