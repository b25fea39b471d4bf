"""Ollama's API with the official `ollama` client: /api/chat and /api/generate give the answers the OpenAI
endpoints give for the same turns, streamed as newline-delimited JSON or not; options map onto the sampling
params; `format` is structured output; errors are Ollama's {"error": ...}; /api/tags lists the model."""

from __future__ import annotations

import json

import ollama
import pytest

from tests.server.conftest import API_KEY, wait_drained

TURNS = [{"role": "user", "content": "What is the capital of France?"}]
GREEDY = {"temperature": 0, "num_predict": 5}


@pytest.fixture(scope="module")
def llama(server):
    return ollama.Client(host=server.url, headers={"Authorization": f"Bearer {API_KEY}"}, timeout=300)


def test_tags_list_the_served_model(llama, model):
    assert [m.model for m in llama.list().models] == [model]


def test_chat_answers_as_the_chat_endpoint_does_streamed_or_not(llama, client, model):
    reply = llama.chat(model=model, messages=TURNS, options=GREEDY)
    chat = client.chat.completions.create(model=model, messages=TURNS, max_tokens=5, temperature=0)
    assert reply.message.role == "assistant" and reply.message.content == chat.choices[0].message.content
    assert reply.done and reply.done_reason == "length"
    assert reply.prompt_eval_count == chat.usage.prompt_tokens and reply.eval_count == 5
    pieces = list(llama.chat(model=f"{model}:latest", messages=TURNS, options=GREEDY, stream=True))
    assert all(not p.done for p in pieces[:-1]) and pieces[-1].done and pieces[-1].eval_count == 5
    assert "".join(p.message.content for p in pieces) == reply.message.content


def test_generate_with_the_template_raw_and_a_format(llama, client, model):
    templated = llama.generate(model=model, prompt=TURNS[0]["content"], options=GREEDY)
    chat = client.chat.completions.create(model=model, messages=TURNS, max_tokens=5, temperature=0)
    assert templated.response == chat.choices[0].message.content
    raw = llama.generate(model=model, prompt="The capital of France is", raw=True, options=GREEDY)
    text = client.completions.create(model=model, prompt="The capital of France is", max_tokens=5,
                                     temperature=0)
    assert raw.response == text.choices[0].text
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    shaped = llama.chat(model=model, messages=[{"role": "user", "content": "Name a city, as JSON."}],
                        format=schema, options={"temperature": 0, "num_predict": 40})
    assert set(json.loads(shaped.message.content)) == {"city"}


@pytest.mark.parametrize(("kwargs", "status", "words"), [
    ({"model": "llama3"}, 404, "model 'llama3' not found"),
    ({"options": {"mirostat": 2}}, 400, "mirostat"),
    ({"options": {"temperature": -1}}, 400, "temperature"),
    ({"think": True}, 400, "think"),
])
def test_bad_requests_get_ollamas_error(llama, http, model, kwargs, status, words):
    with pytest.raises(ollama.ResponseError) as refused:
        llama.chat(**{"model": model, "messages": TURNS, **kwargs})
    assert refused.value.status_code == status and words in refused.value.error
    wait_drained(http)
