"""The pythonic format (SGLang's function_call/pythonic_detector.py): the calls as a Python list of calls with
literal keyword arguments, `[get_weather(city="Paris"), get_time(zone="UTC")]`.

A call's arguments are only known when its list is whole (a keyword's value may still grow), so a stream
holds a list back from its `[` until it closes and parses, then sends each call with all its arguments.
"""

from __future__ import annotations

import ast
import json

from minisgl.function_call.core_types import StreamingParseResult, ToolCallItem


def parse_call_list(text: str) -> list[tuple[str, str]] | None:
    """[(name, arguments JSON)] if text is a list of calls with literal keyword arguments, else None."""
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        return None
    if not isinstance(tree, ast.List) or not tree.elts:
        return None
    calls = []
    for node in tree.elts:
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)) or node.args:
            return None
        try:
            kwargs = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords}
        except ValueError:
            return None
        calls.append((node.func.id, json.dumps(kwargs, ensure_ascii=False)))
    return calls


class PythonicDetector:
    def __init__(self) -> None:
        self._buffer = ""
        self._sent = 0  # calls sent so far

    def has_tool_call(self, text: str) -> bool:
        start = text.find("[")
        return start >= 0 and parse_call_list(text[start:text.rfind("]") + 1]) is not None

    def detect_and_parse(self, text: str) -> StreamingParseResult:
        start, end = text.find("["), text.rfind("]")
        calls = parse_call_list(text[start:end + 1]) if 0 <= start < end else None
        if calls is None:
            return StreamingParseResult(normal_text=text)
        items = [ToolCallItem(tool_index=i, name=name, parameters=args)
                 for i, (name, args) in enumerate(calls)]
        return StreamingParseResult(normal_text=text[:start] + text[end + 1:], calls=items)

    def parse_streaming_increment(self, new_text: str) -> StreamingParseResult:
        self._buffer += new_text
        start = self._buffer.find("[")
        if start < 0:
            text, self._buffer = self._buffer, ""
            return StreamingParseResult(normal_text=text)
        result = StreamingParseResult(normal_text=self._buffer[:start])
        self._buffer = self._buffer[start:]
        end = self._buffer.find("]")
        while end >= 0:  # the first `]` that closes a list of calls
            calls = parse_call_list(self._buffer[:end + 1])
            if calls is not None:
                for name, args in calls:
                    result.calls.append(ToolCallItem(tool_index=self._sent, name=name, parameters=args))
                    self._sent += 1
                self._buffer = self._buffer[end + 1:]
                return result
            end = self._buffer.find("]", end + 1)
        return result

    def flush(self) -> StreamingParseResult:
        """The stream ended: what was held back is text (a `[` that never became a list of calls)."""
        text, self._buffer = self._buffer, ""
        return StreamingParseResult(normal_text=text)
