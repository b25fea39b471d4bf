"""The official `openai` client against a real `minisgl serve`: chat and text completions, streamed and not,
give the offline Engine's greedy answers (same float32 weights and flags), with OpenAI's usage and finish
reasons. Also the native /generate and /v1/models."""

from __future__ import annotations

import itertools
import json

import openai
import pytest

from tests.server.conftest import wait_drained
from tracer.check import check_trace
from tracer.reader import load_trace

CHATS = [
    [{"role": "user", "content": "What is the capital of China?"}],
    [{"role": "system", "content": "Answer in one short sentence."},
     {"role": "user", "content": "Why is the sky blue?"}],
]
MAX_TOKENS = 16
GREEDY = {"max_new_tokens": MAX_TOKENS, "temperature": 0}


@pytest.fixture(scope="module")
def engine_answers(engine) -> list[dict]:
    return [engine.generate(messages, GREEDY) for messages in CHATS]


@pytest.mark.parametrize("i", range(len(CHATS)))
def test_chat_completion_equals_engine(client, model, engine_answers, i):
    ref = engine_answers[i]
    resp = client.chat.completions.create(model=model, messages=CHATS[i], temperature=0,
                                          max_tokens=MAX_TOKENS)
    choice = resp.choices[0]
    assert choice.message.role == "assistant"
    assert choice.message.content == ref["text"]
    assert choice.finish_reason == ref["finish_reason"]["type"]
    assert resp.usage.prompt_tokens == ref["usage"]["prompt_tokens"]
    assert resp.usage.completion_tokens == ref["usage"]["completion_tokens"]
    assert resp.usage.total_tokens == resp.usage.prompt_tokens + resp.usage.completion_tokens
    assert resp.id.startswith("chatcmpl-") and resp.model == model


@pytest.mark.parametrize("i", range(len(CHATS)))
def test_chat_stream_equals_engine_and_reports_cached_tokens(client, model, engine_answers, i):
    ref = engine_answers[i]
    kwargs = {"model": model, "messages": CHATS[i], "temperature": 0, "max_tokens": MAX_TOKENS}
    client.chat.completions.create(**kwargs)  # the prompt is now in the radix cache
    chunks = list(client.chat.completions.create(**kwargs, stream=True,
                                                 stream_options={"include_usage": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == ref["text"]
    reasons = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert reasons == [ref["finish_reason"]["type"]]
    usage = chunks[-1].usage
    assert chunks[-1].choices == [] and usage.completion_tokens == ref["usage"]["completion_tokens"]
    # every prompt token but the last came from the cache: the last must run to give the next token
    assert usage.prompt_tokens_details.cached_tokens == usage.prompt_tokens - 1
    assert len({c.id for c in chunks}) == 1


def test_text_completion_equals_engine_for_text_and_token_ids(client, model, engine):
    prompt = "The capital of France is"
    ref = engine.generate(prompt, GREEDY)
    by_text = client.completions.create(model=model, prompt=prompt, temperature=0, max_tokens=MAX_TOKENS)
    ids = engine.tokenizer.encode(prompt, add_special_tokens=False)
    by_ids = client.completions.create(model=model, prompt=ids, temperature=0, max_tokens=MAX_TOKENS)
    for resp in (by_text, by_ids):
        assert resp.choices[0].text == ref["text"]
        assert resp.choices[0].finish_reason == "length"
        assert resp.usage.completion_tokens == MAX_TOKENS and resp.usage.prompt_tokens == len(ids)
    chunks = list(client.completions.create(model=model, prompt=prompt, temperature=0, max_tokens=MAX_TOKENS,
                                            stream=True))
    assert "".join(c.choices[0].text for c in chunks) == ref["text"]
    assert chunks[-1].choices[0].finish_reason == "length"


def test_max_completion_tokens_and_max_tokens_cut_with_length(client, model):
    messages = CHATS[0]
    a = client.chat.completions.create(model=model, messages=messages, temperature=0, max_completion_tokens=3)
    b = client.chat.completions.create(model=model, messages=messages, temperature=0, max_tokens=3)
    for resp in (a, b):
        assert resp.usage.completion_tokens == 3 and resp.choices[0].finish_reason == "length"
    assert a.choices[0].message.content == b.choices[0].message.content


def test_stop_string_ends_the_answer_before_it(client, model, engine_answers):
    assert engine_answers[0]["text"].startswith("The capital of China is Beijing")
    resp = client.chat.completions.create(model=model, messages=CHATS[0], temperature=0,
                                          max_tokens=MAX_TOKENS, stop=["Beijing"])
    assert resp.choices[0].message.content == "The capital of China is "
    assert resp.choices[0].finish_reason == "stop"


def test_seed_decides_the_sampled_text_and_top_k_min_p_reach_the_sampler(client, model):
    """Sampled text completions (temperature 1, with top_p, top_k and min_p): the same seed twice gives the
    same text, other seeds give other texts, and not every seed gives the greedy text, so sampling ran and the
    seed chose the draws (ignored seeds would give two texts for one seed; ignored sampling, one text for
    all). top_k 1, or min_p 1, leaves one candidate: with the same seed either gives the greedy text, so both
    reach the sampler (the same seed without them draws another text: asserted too)."""
    def complete(**params) -> str:
        resp = client.completions.create(model=model, prompt="Once upon a time", max_tokens=12, **params)
        return resp.choices[0].text

    greedy = complete(temperature=0)
    sampling = {"temperature": 1.0, "top_p": 0.95, "extra_body": {"top_k": 40, "min_p": 0.02}}
    by_seed = {seed: complete(seed=seed, **sampling) for seed in (1234, 1, 2)}
    assert complete(seed=1234, **sampling) == by_seed[1234]
    assert len(set(by_seed.values())) > 1
    assert any(text != greedy for text in by_seed.values())
    assert complete(seed=1234, temperature=1.0) != greedy
    assert complete(seed=1234, temperature=1.0, extra_body={"top_k": 1}) == greedy
    assert complete(seed=1234, temperature=1.0, extra_body={"min_p": 1.0}) == greedy


def test_models_lists_the_served_model(client, model):
    cards = client.models.list().data
    assert [c.id for c in cards] == [model]
    assert cards[0].model_extra["max_model_len"] == 1024


def test_native_generate_text_and_input_ids_stream_or_not(http, engine):
    prompt = "The capital of France is"
    ref = engine.generate(prompt, GREEDY)
    resp = http.post("/generate", json={"text": prompt, "sampling_params": GREEDY})
    assert resp.status_code == 200
    body = resp.json()
    assert body["text"] == ref["text"] and body["output_ids"] == ref["output_ids"]
    assert body["meta_info"]["finish_reason"]["type"] == "length"
    assert body["meta_info"]["completion_tokens"] == MAX_TOKENS

    ids = engine.tokenizer.encode(prompt, add_special_tokens=False)
    chunks = []
    streamed = {"input_ids": ids, "sampling_params": GREEDY, "stream": True}
    with http.stream("POST", "/generate", json=streamed) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in r.iter_lines() if line.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"
    chunks = [json.loads(line[6:]) for line in lines[:-1]]
    assert chunks[-1]["text"] == ref["text"] and chunks[-1]["output_ids"] == ref["output_ids"]
    # SGLang: each chunk carries the whole text so far
    assert all(b["text"].startswith(a["text"]) for a, b in itertools.pairwise(chunks))


def test_max_tokens_past_the_context_is_refused_as_sglang_does(client, model):
    """1016 prompt tokens leave 8 of the test server's 1024-token context: max_tokens 8 runs, max_tokens 50
    is a 400 with SGLang's message and both numbers (streamed too, before any chunk), and the server goes on."""
    prompt = [1] + [2683] * 1015  # token ids: the completions endpoint takes them as the prompt
    fits = client.completions.create(model=model, prompt=prompt, max_tokens=8, temperature=0)
    assert fits.usage.prompt_tokens == 1016 and fits.usage.completion_tokens <= 8
    assert "warning" not in (fits.model_extra or {})
    for stream in (False, True):
        with pytest.raises(openai.BadRequestError) as refused:
            client.completions.create(model=model, prompt=prompt, max_tokens=50, temperature=0, stream=stream)
        assert refused.value.status_code == 400
        assert refused.value.code == "context_length_exceeded"
        assert refused.value.body["message"] == (
            "Requested token count exceeds the model's maximum context length of 1024 tokens. You requested "
            "a total of 1066 tokens: 1016 tokens from the input messages and 50 tokens for the completion. "
            "Please reduce the number of tokens in the input messages or the completion to fit within the "
            "limit.")
    assert client.completions.create(model=model, prompt="Hello", max_tokens=2, temperature=0).choices


def test_response_format_and_regex_with_the_openai_client(client, model, http):
    """OpenAI's response_format (json_schema, json_object) and SGLang's regex (extra_body) through the
    official client: the answers parse and match; a regex that does not compile is a 400 naming it."""
    schema = {"type": "object", "properties": {"colour": {"type": "string"}}, "required": ["colour"]}
    chat = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "Name a colour, as JSON."}], max_tokens=32,
        temperature=0, response_format={"type": "json_schema", "json_schema": {"name": "c", "schema": schema}})
    assert set(json.loads(chat.choices[0].message.content)) == {"colour"}
    assert chat.choices[0].finish_reason == "stop"
    anything = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": 'Reply with exactly this JSON object: {"ok": true}'}],
        max_tokens=40, temperature=0, response_format={"type": "json_object"})
    assert json.loads(anything.choices[0].message.content) == {"ok": True}
    text = client.completions.create(model=model, prompt="The year was", max_tokens=8, temperature=0,
                                     extra_body={"regex": " [0-9]{4}"})
    assert text.choices[0].text[0] == " " and text.choices[0].text[1:].isdigit()
    with pytest.raises(openai.BadRequestError) as refused:
        client.completions.create(model=model, prompt="x", max_tokens=4, extra_body={"regex": "(a"})
    assert refused.value.body["message"].startswith("invalid regex")
    assert http.get("/health").status_code == 200


def test_n_choices_share_one_prefill(server, client, model, http):
    """n = 3: three choices, indexed; the prompt is prefilled once (the copies after the first find it in the
    radix cache), usage counts it once; with a seed the choices differ, greedy they agree; streamed too."""
    prompt = "Once upon a time, in a village by the sea, there lived"
    resp = client.completions.create(model=model, prompt=prompt, max_tokens=6, n=3, seed=7, temperature=1.0,
                                     extra_body={"rid": "n-choices"})
    assert [c.index for c in resp.choices] == [0, 1, 2]
    assert len({c.text for c in resp.choices}) > 1, "seeds 7, 8 and 9 draw differently"
    assert resp.usage.completion_tokens == sum(len(c.text) > 0 for c in resp.choices) * 6
    again = client.completions.create(model=model, prompt=prompt, max_tokens=6, n=3, seed=7, temperature=1.0)
    assert [c.text for c in again.choices] == [c.text for c in resp.choices]
    greedy = client.chat.completions.create(model=model, n=2, max_tokens=5, temperature=0,
                                            messages=[{"role": "user", "content": "Name a fruit."}])
    assert greedy.choices[0].message.content == greedy.choices[1].message.content
    chunks = list(client.completions.create(model=model, prompt=prompt, max_tokens=6, n=3, seed=7,
                                            temperature=1.0, stream=True,
                                            stream_options={"include_usage": True}))
    texts = {i: "".join(c.choices[0].text for c in chunks if c.choices and c.choices[0].index == i)
             for i in range(3)}
    assert [texts[i] for i in range(3)] == [c.text for c in resp.choices]
    assert chunks[-1].usage.completion_tokens == resp.usage.completion_tokens
    wait_drained(http)
    matched = {ev.rid: (ev.get("prefix_len"), len(ev.get("matched_slots"))) for ev in
               load_trace(server.trace_dir).events if ev.name == "sched.prefix_matched"
               and ev.rid.startswith("n-choices-")}
    created = {ev.rid: ev.get("input_len") for ev in load_trace(server.trace_dir).events
               if ev.name == "sched.req_created" and ev.rid.startswith("n-choices-")}
    with pytest.raises(openai.NotFoundError):  # refused before any copy was made: nothing of it is traced
        client.completions.create(model="no-such-model", prompt=prompt, max_tokens=2, n=2)
    wait_drained(http)
    assert [p for p in check_trace(load_trace(server.trace_dir)) if "n-choices" in p or "never" in p] == []
    # copy 0 computed the prompt (whatever part of it other tests left in the cache), the others reuse it all
    assert matched["n-choices-0"][0] < created["n-choices-0"] - 1
    assert matched["n-choices-1"][0] == matched["n-choices-2"][0] == created["n-choices-0"] - 1


def test_a_list_of_prompts_answers_each_as_alone(client, model):
    """Several prompts in one /v1/completions request (text or token ids), as lm-evaluation-harness batches
    them: one choice per prompt, in order, each the answer the prompt gets alone (greedy), echo and logprobs
    per prompt; with n = 2, prompt p's choices at 2p and 2p + 1."""
    prompts = ["The capital of France is", "Two plus two equals"]
    batch = client.completions.create(model=model, prompt=prompts, max_tokens=4, temperature=0, echo=True,
                                      logprobs=1)
    alone = [client.completions.create(model=model, prompt=p, max_tokens=4, temperature=0, echo=True, logprobs=1)
             for p in prompts]
    assert [c.index for c in batch.choices] == [0, 1]
    assert [c.text for c in batch.choices] == [a.choices[0].text for a in alone]
    assert [c.logprobs.tokens for c in batch.choices] == [a.choices[0].logprobs.tokens for a in alone]
    assert batch.usage.prompt_tokens == sum(a.usage.prompt_tokens for a in alone)
    ids = [[504, 3575, 282, 4649, 314], [7397, 2579, 2579, 18207]]
    doubled = client.completions.create(model=model, prompt=ids, max_tokens=3, temperature=0, n=2)
    assert [c.index for c in doubled.choices] == [0, 1, 2, 3]
    assert doubled.choices[0].text == doubled.choices[1].text and doubled.choices[2].text == doubled.choices[3].text
