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
    ({"messages": TURNS, "tools": [{"name": "f", "input_schema": {"type": "object"}}]}, "tools"),
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
