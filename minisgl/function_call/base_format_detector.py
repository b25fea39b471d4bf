"""BaseFormatDetector (SGLang's function_call/base_format_detector.py): calls written as a JSON object between
a start and an end token, `{"name": ..., "arguments": {...}}`.

Streamed, text outside calls is handed on as it comes (holding back a tail that may be the start of a start
token); inside a call the name is sent once it is whole (partial-json-parser reads the unfinished object),
then the arguments' JSON text piece by piece, always one character behind (that character may be the
object's closing brace, not the arguments'), and the rest when the end token arrives. The pieces joined are
exactly the arguments detect_and_parse gives for the whole text.
"""

from __future__ import annotations

import json
import re

from partial_json_parser import Allow
from partial_json_parser import loads as partial_loads

from minisgl.function_call.core_types import StreamingParseResult, ToolCallItem

ARGS_KEY = re.compile(r'"(?:arguments|parameters)"\s*:\s*')


def split_call(text: str) -> tuple[str, str] | None:
    """A call object's name and its arguments' JSON text, or None if the text is not such an object."""
    try:
        obj = json.loads(text)
    except ValueError:
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return None
    match = ARGS_KEY.search(text)
    if match is None:
        return obj["name"], "{}"
    end = text.rstrip().rfind("}")  # the object's own closing brace
    return obj["name"], text[match.end():end].strip()


class BaseFormatDetector:
    bot_token = ""  # the start of a call
    eot_token = ""  # its end

    def __init__(self) -> None:
        self._buffer = ""
        self._in_call = False
        self._tool_index = -1
        self._name_sent = False
        self._args_sent = ""

    def has_tool_call(self, text: str) -> bool:
        return self.bot_token in text

    def detect_and_parse(self, text: str) -> StreamingParseResult:
        """Every call in a whole answer; the text around them is the content."""
        result, rest, index = StreamingParseResult(), text, 0
        normal = []
        while self.bot_token in rest:
            before, _, after = rest.partition(self.bot_token)
            body, found, rest = after.partition(self.eot_token)
            call = split_call(body.strip())
            if call is None:  # not a call after all: it stays text
                normal.append(before + self.bot_token + body + found)
                continue
            normal.append(before)
            result.calls.append(ToolCallItem(tool_index=index, name=call[0], parameters=call[1]))
            index += 1
        normal.append(rest)
        result.normal_text = "".join(normal)
        return result

    def flush(self) -> StreamingParseResult:
        """The stream ended: a held-back tail is text; a call without its end token is finished as it is."""
        result = StreamingParseResult()
        if self._in_call:
            self._stream_call(self._buffer.strip(), True, result)
        else:
            result.normal_text = self._buffer
        self._buffer, self._in_call = "", False
        return result

    def parse_streaming_increment(self, new_text: str) -> StreamingParseResult:
        self._buffer += new_text
        result = StreamingParseResult()
        while True:
            if not self._in_call:
                start = self._buffer.find(self.bot_token)
                if start < 0:
                    keep = _partial_suffix(self._buffer, self.bot_token)
                    result.normal_text += self._buffer[:len(self._buffer) - keep]
                    self._buffer = self._buffer[len(self._buffer) - keep:]
                    return result
                result.normal_text += self._buffer[:start]
                self._buffer = self._buffer[start + len(self.bot_token):]
                self._in_call, self._name_sent, self._args_sent = True, False, ""
                self._tool_index += 1
            end = self._buffer.find(self.eot_token)
            if end < 0:  # no end token yet: hold back a tail that may be its beginning
                body = self._buffer[:len(self._buffer) - _partial_suffix(self._buffer, self.eot_token)]
            else:
                body = self._buffer[:end]
            self._stream_call(body.strip() if end >= 0 else body.lstrip(), end >= 0, result)
            if end < 0:
                return result
            self._buffer = self._buffer[end + len(self.eot_token):]
            self._in_call = False

    def _stream_call(self, body: str, complete: bool, result: StreamingParseResult) -> None:
        if not self._name_sent:
            try:
                partial = partial_loads(body, Allow.ALL & ~Allow.STR) if body else {}
            except ValueError:
                partial = {}
            if isinstance(partial, dict) and isinstance(partial.get("name"), str):
                result.calls.append(ToolCallItem(tool_index=self._tool_index, name=partial["name"]))
                self._name_sent = True
        if not self._name_sent:
            return
        if complete:
            call = split_call(body)
            args = call[1] if call is not None else self._args_sent
        else:
            match = ARGS_KEY.search(body)
            if match is None:
                return
            args = body[match.end():].rstrip()[:-1]  # one character behind: it may close the object
        if args.startswith(self._args_sent) and len(args) > len(self._args_sent):
            piece = args[len(self._args_sent):]
            result.calls.append(ToolCallItem(tool_index=self._tool_index, parameters=piece))
            self._args_sent = args


def _partial_suffix(text: str, token: str) -> int:
    """How many characters at the end of text could be the beginning of token."""
    for n in range(min(len(token) - 1, len(text)), 0, -1):
        if token.startswith(text[-n:]):
            return n
    return 0
