"""How a chat answer's text becomes reasoning_content, content and tool_calls (SGLang's serving_chat does
this between the TokenizerManager and the response), whole or piece by piece in a stream.

    --reasoning-parser         a <think> block -> reasoning_content (reasoning_parser.py)
    tool_choice auto           calls found by --tool-call-parser (function_call/) -> tool_calls
    tool_choice required/named the answer is a JSON array of {"name", "parameters"}, forced by a grammar
                               (forced_tool_schema); streamed, the calls go out when the array is whole
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from minisgl.function_call.function_call_parser import FunctionCallParser, get_json_schema_constraint
from minisgl.reasoning_parser import ReasoningParser
from minisgl.server.protocol_tools import ToolChoice, tool_call_json


def forces_a_call(request) -> bool:
    """tool_choice required or named: a grammar makes the model call a tool."""
    return bool(request.tools) and request.tool_choice not in (None, "none", "auto")


def forced_tool_schema(request) -> str | None:
    """The json_schema that makes the model call a tool (tool_choice required or named), or None."""
    if not forces_a_call(request):
        return None
    tools = [tool.model_dump() for tool in request.tools]
    choice = request.tool_choice.model_dump() if isinstance(request.tool_choice, ToolChoice) else "required"
    schema = get_json_schema_constraint(tools, choice)
    if request.parallel_tool_calls is False:
        schema["maxItems"] = 1
    return json.dumps(schema)


def new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


class ChatOutputSplitter:
    def __init__(self, request, tool_call_parser: str | None, reasoning_parser: str | None):
        self.forced = forces_a_call(request)  # (the schema itself went into the sampling params)
        self.tool_parser = (FunctionCallParser(tool_call_parser) if tool_call_parser and request.tools
                            and request.tool_choice in (None, "auto") and not self.forced else None)
        self.reasoning = (ReasoningParser(reasoning_parser)
                          if reasoning_parser and request.separate_reasoning else None)
        self.stream_reasoning = request.stream_reasoning
        self.held_reasoning = ""  # stream_reasoning false: sent whole when the reasoning ends
        self.forced_text = ""  # a forced call's JSON, until it is whole
        self.call_ids: dict[int, str] = {}
        self.made_calls = False
        self.trace_pending = ""  # generated text no chunk has carried yet (serving_chat.py)

    # ---- a whole answer -----------------------------------------------------------------------------
    def split_whole(self, text: str) -> tuple[str | None, str | None, list[dict[str, Any]]]:
        """(reasoning_content, content, tool_calls) of a finished answer."""
        reasoning = None
        if self.reasoning is not None:
            reasoning, text = self.reasoning.parse_non_stream(text)
        if self.forced:
            calls = forced_calls(text)
            return (reasoning, None, calls) if calls else (reasoning, text, [])
        if self.tool_parser is not None and self.tool_parser.has_tool_call(text):
            result = self.tool_parser.parse_non_stream(text)
            calls = [tool_call_json(c.tool_index, new_call_id(), c.name, c.parameters) for c in result.calls]
            return reasoning, result.normal_text or None, calls
        return reasoning, text, []

    # ---- a stream ---------------------------------------------------------------------------------
    def split_piece(self, delta: str, finished: bool) -> tuple[str, str, list[dict[str, Any]]]:
        """(reasoning piece, content piece, tool-call deltas) of a new piece of a streamed answer."""
        reasoning = ""
        if self.reasoning is not None:
            reasoning, delta = self.reasoning.parse_stream_chunk(delta)
            if finished:
                more_reasoning, more = self.reasoning.flush()
                reasoning, delta = reasoning + more_reasoning, delta + more
            if not self.stream_reasoning:
                self.held_reasoning += reasoning
                if finished or delta:  # the reasoning has ended: all of it in one piece
                    reasoning, self.held_reasoning = self.held_reasoning, ""
                else:
                    reasoning = ""
        calls: list[dict[str, Any]] = []
        if self.forced:
            self.forced_text += delta
            delta = ""
            if finished:
                calls = forced_calls(self.forced_text)
                delta = "" if calls else self.forced_text
        elif self.tool_parser is not None:
            results = [self.tool_parser.parse_stream_chunk(delta)]
            if finished:
                results.append(self.tool_parser.flush())
            delta = "".join(r.normal_text for r in results)
            calls = [self._delta(c) for r in results for c in r.calls]
        self.made_calls = self.made_calls or bool(calls)
        return reasoning, delta, calls

    def _delta(self, item) -> dict[str, Any]:
        if item.name is not None:  # a call's first piece: its id and name
            self.call_ids[item.tool_index] = new_call_id()
            return tool_call_json(item.tool_index, self.call_ids[item.tool_index], item.name, item.parameters)
        return {"index": item.tool_index, "function": {"arguments": item.parameters}}


def forced_calls(text: str) -> list[dict[str, Any]]:
    """The calls of a forced answer (a JSON array of {"name", "parameters"}); [] if it is not whole (cut by
    max_tokens)."""
    try:
        items = json.loads(text)
    except ValueError:
        return []
    if not isinstance(items, list):
        return []
    return [tool_call_json(i, new_call_id(), item["name"], json.dumps(item["parameters"], ensure_ascii=False))
            for i, item in enumerate(items) if isinstance(item, dict) and "name" in item]
