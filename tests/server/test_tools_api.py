"""Tool calls and reasoning through the official openai client, on the test server (--tool-call-parser
qwen25, --reasoning-parser qwen3). The bundled model was not trained for either, so each answer's format is
forced by a grammar: tool_choice required or named makes its own (a JSON array of calls); for "auto" and
for reasoning the test gives a regular expression, and the server's parsers must find the calls and the
<think> block in the text, whole and streamed."""

from __future__ import annotations

import json

import openai
import pytest

from tests.server.conftest import wait_drained

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12}},
                   "required": ["city"]}}}
TIME = {"type": "function", "function": {"name": "get_time", "parameters": {
    "type": "object", "properties": {"zone": {"type": "string", "enum": ["UTC", "CET"]}}, "required": ["zone"]}}}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
AUTO_CALL = r'Checking\.\n<tool_call>\n\{"name": "get_weather", "arguments": \{"city": "(Paris|Rome)"\}\}\n</tool_call>'


def test_required_and_named_tool_choice_make_a_call(client, model):
    resp = client.chat.completions.create(model=model, messages=ASK, tools=[WEATHER, TIME], temperature=0,
                                          tool_choice="required", max_tokens=60)
    choice = resp.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    call = choice.message.tool_calls[0]
    assert call.type == "function" and call.id.startswith("call_")
    assert call.function.name in {"get_weather", "get_time"}
    assert isinstance(json.loads(call.function.arguments), dict)
    named = client.chat.completions.create(model=model, messages=ASK, tools=[WEATHER, TIME], temperature=0,
                                           tool_choice={"type": "function", "function": {"name": "get_time"}},
                                           max_tokens=60)
    calls = named.choices[0].message.tool_calls
    assert [c.function.name for c in calls] == ["get_time"]
    assert json.loads(calls[0].function.arguments)["zone"] in {"UTC", "CET"}


def test_auto_finds_the_calls_in_the_text_whole_and_streamed(client, model):
    kwargs = {"model": model, "messages": ASK, "tools": [WEATHER], "temperature": 0, "max_tokens": 120,
              "extra_body": {"regex": AUTO_CALL}}
    resp = client.chat.completions.create(**kwargs)
    choice = resp.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content == "Checking.\n"
    call = choice.message.tool_calls[0]
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments)["city"] in {"Paris", "Rome"}
    chunks = list(client.chat.completions.create(**kwargs, stream=True))
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    content = "".join(d.content or "" for d in deltas)
    pieces = [t for d in deltas for t in (d.tool_calls or ())]
    assert content == choice.message.content
    assert pieces[0].function.name == "get_weather" and pieces[0].id.startswith("call_")
    assert "".join(p.function.arguments or "" for p in pieces) == call.function.arguments
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_tool_choice_none_and_a_history_with_calls(client, model):
    plain = client.chat.completions.create(model=model, messages=ASK, tools=[WEATHER], tool_choice="none",
                                           max_tokens=6, temperature=0)
    assert plain.choices[0].message.tool_calls is None and plain.choices[0].finish_reason == "length"
    history = [*ASK, {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "Sunny, 24 degrees."}]
    answer = client.chat.completions.create(model=model, messages=history, tools=[WEATHER], max_tokens=8,
                                            temperature=0)
    assert answer.choices[0].message.content


def test_reasoning_content_whole_and_streamed(client, model):
    kwargs = {"model": model, "messages": [{"role": "user", "content": "Is the sea salty?"}], "temperature": 0,
              "max_tokens": 40, "extra_body": {"regex": r"<think>\n[a-z ]{1,20}\n</think>\n\n(Yes|No)\."}}
    resp = client.chat.completions.create(**kwargs)
    message = resp.choices[0].message
    assert message.content in {"Yes.", "No."}
    reasoning = message.model_extra["reasoning_content"]
    assert reasoning and "<think>" not in reasoning and "</think>" not in message.content
    chunks = list(client.chat.completions.create(**kwargs, stream=True))
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    assert "".join(d.content or "" for d in deltas) == message.content
    assert "".join((d.model_extra or {}).get("reasoning_content") or "" for d in deltas).strip() == reasoning
    kept = client.chat.completions.create(**{**kwargs, "extra_body": {**kwargs["extra_body"],
                                                                     "separate_reasoning": False}})
    assert kept.choices[0].message.content.startswith("<think>")


@pytest.mark.parametrize(("body", "param", "words"), [
    ({"tools": [{"type": "function", "function": {"description": "x"}}]}, "tools[0].function.name", "required"),
    ({"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "nope"}}}, None, "nope"),
    ({"tool_choice": "required"}, None, "no tools"),
    ({"tools": [WEATHER], "tool_choice": "required", "regex": "a"}, None, "grammar of its own"),
    ({"messages": [{"role": "tool", "content": "x"}]}, None, "tool_call_id"),
])
def test_bad_tool_requests_are_400s_naming_the_field(http, body, param, words):
    resp = http.post("/v1/chat/completions", json={"messages": ASK, "max_tokens": 4, **body})
    assert resp.status_code == 400, resp.text
    error = resp.json()["error"]
    assert words in error["message"] and (param is None or error["param"] == param)
    wait_drained(http)


def test_an_unknown_tool_call_parser_is_refused_at_start():
    from minisgl.function_call.function_call_parser import FunctionCallParser

    with pytest.raises(ValueError, match="pythonic"):
        FunctionCallParser("llama9")
    assert openai.BadRequestError  # the client raises it for every 400 above
