"""The tool-call and reasoning parsers on hand-written answers, whole and streamed split at every character:
the stream's pieces joined are what the whole answer gives (content, each call's name and arguments)."""

from __future__ import annotations

import json

import pytest

from minisgl.function_call.function_call_parser import FunctionCallParser, get_json_schema_constraint
from minisgl.reasoning_parser import ReasoningParser

QWEN = ('Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": [1, 2]}}\n'
        '</tool_call>\n<tool_call>\n{"name": "get_time", "arguments": {"zone": "{UTC}"}}\n</tool_call>')
PYTHONIC = 'Sure. [get_weather(city="Paris", days=[1, 2]), get_time(zone="UTC")] Done.'


def streamed(parser, text: str, cut: int) -> tuple[str, dict[int, str | None], dict[int, str]]:
    """Feed text in two pieces split at `cut`, then one character at a time; join the results."""
    pieces = [text[:cut]] + list(text[cut:])
    content, names, args = "", {}, {}
    results = [parser.parse_stream_chunk(p) for p in pieces] + [parser.flush()]
    for result in results:
        content += result.normal_text
        for call in result.calls:
            if call.name is not None:
                assert call.tool_index not in names, "a call's name is sent once"
                names[call.tool_index] = call.name
            args[call.tool_index] = args.get(call.tool_index, "") + call.parameters
    return content, names, args


@pytest.mark.parametrize(("name", "text", "content"), [("qwen25", QWEN, "Let me check.\n\n"),
                                                       ("hermes", QWEN, "Let me check.\n\n"),
                                                       ("pythonic", PYTHONIC, "Sure.  Done.")])
def test_whole_and_streamed_at_every_split_agree(name, text, content):
    whole = FunctionCallParser(name).parse_non_stream(text)
    assert whole.normal_text == content
    assert [c.name for c in whole.calls] == ["get_weather", "get_time"]
    assert json.loads(whole.calls[0].parameters) == {"city": "Paris", "days": [1, 2]}
    for cut in range(len(text) + 1):
        got_content, names, args = streamed(FunctionCallParser(name), text, cut)
        assert got_content == content, cut
        assert names == {0: "get_weather", 1: "get_time"}, cut
        assert [args[i] for i in range(2)] == [c.parameters for c in whole.calls], cut


def test_text_without_calls_passes_through_and_a_broken_call_stays_text():
    for name in ("qwen25", "pythonic"):
        text = "Plain words, a [bracket] and <tool_ but no call."
        assert FunctionCallParser(name).parse_non_stream(text).normal_text == text
        assert streamed(FunctionCallParser(name), text, 3)[0] == text
    broken = "<tool_call>\nnot json\n</tool_call>"
    assert FunctionCallParser("qwen25").parse_non_stream(broken).normal_text == broken
    with pytest.raises(ValueError, match="qwen25"):
        FunctionCallParser("llama9")


@pytest.mark.parametrize(("model", "text", "reasoning", "content"), [
    ("deepseek-r1", "I should add.\n</think>\n\nIt is 4.", "I should add.", "It is 4."),
    ("deepseek-r1", "<think>Hmm.</think>Yes.", "Hmm.", "Yes."),
    ("deepseek-r1", "still thinking", "still thinking", ""),
    ("qwen3", "<think>\nHmm.\n</think>\n\nYes.", "Hmm.", "Yes."),
    ("qwen3", "No thinking here.", None, "No thinking here."),
])
def test_reasoning_whole_and_streamed(model, text, reasoning, content):
    assert ReasoningParser(model).parse_non_stream(text) == (reasoning, content)
    for cut in range(len(text) + 1):
        parser = ReasoningParser(model)
        pieces = [parser.parse_stream_chunk(p) for p in [text[:cut], *text[cut:]]] + [parser.flush()]
        joined = "".join(r for r, _ in pieces).strip()
        assert (joined or None if reasoning is None else joined) == reasoning, cut
        assert "".join(c for _, c in pieces) == content, cut


def test_required_and_named_tool_choice_schemas():
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}},
             {"type": "function", "function": {"name": "g"}}]
    required = get_json_schema_constraint(tools, "required")
    assert required["minItems"] == 1 and len(required["items"]["anyOf"]) == 2
    named = get_json_schema_constraint(tools, {"type": "function", "function": {"name": "g"}})
    assert named["maxItems"] == 1 and named["items"]["properties"]["name"]["enum"] == ["g"]
    assert get_json_schema_constraint(tools, "auto") is None
