"""Anthropic's Messages API (/v1/messages) with the official `anthropic` client: the same answer as the chat
completions endpoint for the same turns, stop reasons, usage, the named stream events, and errors in
Anthropic's shape; nothing left behind."""

from __future__ import annotations

import anthropic
import pytest

from tests.server.conftest import API_KEY, wait_drained

SYSTEM = "You answer in one short sentence."
TURNS = [{"role": "user", "content": "What is the capital of France?"}]
GREEDY = {"temperature": 0}  # the client no longer has the argument; the API still takes the field


@pytest.fixture(scope="module")
def claude(server):
    return anthropic.Anthropic(base_url=server.url, api_key=API_KEY, max_retries=0, timeout=300)


def test_a_message_answers_as_the_chat_endpoint_does(claude, client, model):
    message = claude.messages.create(model=model, max_tokens=4, system=SYSTEM, messages=TURNS,
                                     extra_body=GREEDY)
    chat = client.chat.completions.create(model=model, max_tokens=4, extra_body=GREEDY,
                                          messages=[{"role": "system", "content": SYSTEM}, *TURNS])
    assert message.type == "message" and message.role == "assistant" and message.model == model
    assert [block.type for block in message.content] == ["text"]
    assert message.content[0].text == chat.choices[0].message.content
    assert message.stop_reason == "max_tokens" and message.stop_sequence is None
    assert message.usage.input_tokens == chat.usage.prompt_tokens
    assert message.usage.output_tokens == chat.usage.completion_tokens == 4


def test_stop_sequences_and_the_end_of_turn(claude, model):
    text = claude.messages.create(model=model, max_tokens=24, messages=TURNS,
                                  extra_body=GREEDY).content[0].text
    word = text.split()[1]  # a stop sequence the greedy answer meets
    stopped = claude.messages.create(model=model, max_tokens=24, messages=TURNS, extra_body=GREEDY,
                                     stop_sequences=[word])
    assert stopped.stop_reason == "stop_sequence" and stopped.stop_sequence == word
    done = claude.messages.create(model=model, max_tokens=200, extra_body=GREEDY,
                                  messages=[{"role": "user", "content": [{"type": "text", "text": "Say hi."}]}])
    assert done.stop_reason == "end_turn"


def test_a_stream_is_anthropics_named_events(claude, model):
    whole = claude.messages.create(model=model, max_tokens=5, system=SYSTEM, messages=TURNS,
                                   extra_body=GREEDY)
    with claude.messages.stream(model=model, max_tokens=5, system=SYSTEM, messages=TURNS,
                                extra_body=GREEDY) as stream:
        events = list(stream)
        final = stream.get_final_message()
    kinds = [e.type for e in events]
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    assert "content_block_start" in kinds and "content_block_stop" in kinds and "message_delta" in kinds
    texts = [e.delta.text for e in events if e.type == "content_block_delta"]
    assert "".join(texts) == final.content[0].text == whole.content[0].text
    assert final.stop_reason == "max_tokens" and final.usage.output_tokens == 5


@pytest.mark.parametrize(("body", "words"), [
    ({"messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]}, "'image' block"),
    ({"messages": TURNS, "thinking": {"type": "enabled", "budget_tokens": 1024}}, "thinking"),
    ({"messages": TURNS, "extra_body": {"temperature": 1.5}}, "temperature"),
    ({"messages": []}, "messages"),
])
def test_bad_requests_get_anthropics_error_shape(claude, http, model, body, words):
    with pytest.raises(anthropic.BadRequestError) as refused:
        claude.messages.create(model=model, max_tokens=4, **body)
    assert refused.value.status_code == 400
    assert refused.value.body["type"] == "error"
    assert refused.value.body["error"]["type"] == "invalid_request_error"
    assert words in refused.value.body["error"]["message"]
    wait_drained(http)


WEATHER = {"name": "get_weather", "description": "The weather in a city",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12}},
                            "required": ["city"]}}


def test_tool_use_forced_by_any_whole_and_streamed(claude, model):
    """tool_choice any (the chat endpoint's "required", forced by a grammar): a tool_use block with the
    tool's name and an input matching its schema, stop_reason tool_use; streamed as a tool_use block filled
    by input_json_delta pieces; and a history with tool_use and tool_result blocks is taken."""
    kwargs = {"model": model, "max_tokens": 80, "messages": [{"role": "user", "content": "Weather in Paris?"}],
              "tools": [WEATHER], "tool_choice": {"type": "any"}, "extra_body": GREEDY}
    message = claude.messages.create(**kwargs)
    assert message.stop_reason == "tool_use"
    use = [b for b in message.content if b.type == "tool_use"]
    assert len(use) == 1 and use[0].name == "get_weather" and isinstance(use[0].input["city"], str)
    assert use[0].id.startswith("toolu_")
    with claude.messages.stream(**kwargs) as stream:
        events = list(stream)
        final = stream.get_final_message()
    starts = [e.content_block for e in events if e.type == "content_block_start"]
    assert [b.type for b in starts][-1] == "tool_use" and starts[-1].name == "get_weather"
    assert [b.input for b in final.content if b.type == "tool_use"] == [use[0].input]
    assert final.stop_reason == "tool_use"
    history = [{"role": "user", "content": "Weather in Paris?"},
               {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_weather",
                                                  "input": {"city": "Paris"}}]},
               {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                             "content": "Sunny, 24 degrees."}]}]
    answer = claude.messages.create(model=model, max_tokens=8, messages=history, tools=[WEATHER],
                                    extra_body=GREEDY)
    assert answer.content[0].type == "text" and answer.content[0].text
