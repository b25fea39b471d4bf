"""Request fields and logprobs on the real server: every field is implemented or refused by name (SGLang's
router fields accepted), logprobs in OpenAI's shapes equal log_softmax of transformers' logits for the same
tokens, echo puts the prompt first, and an OpenAI request without max_tokens runs to the end of the context."""

from __future__ import annotations

import math

import pytest
import torch

USER = [{"role": "user", "content": "What is the capital of China?"}]
CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"


@pytest.mark.parametrize(("path", "body", "param", "words"), [
    (CHAT, {"messages": USER, "frobnicate": 1}, "frobnicate", "Unrecognized request argument supplied: frobnicate"),
    (CHAT, {"messages": USER, "functions": [{"name": "f"}]}, "functions", "does not support `functions`"),
    (CHAT, {"messages": USER, "response_format": {"type": "xml"}}, "response_format.type", "json_schema"),
    (CHAT, {"messages": USER, "response_format": {"type": "json_object"}, "regex": "a"}, None, "both given"),
    (CHAT, {"messages": USER, "logprobs": "yes"}, "logprobs", "boolean"),
    (CHAT, {"messages": USER, "top_logprobs": 2}, "top_logprobs", "needs logprobs"),
    (CHAT, {"messages": [{"role": "user", "content": "x", "name": "ann"}]}, "messages[0].name", "does not support"),
    (CHAT, {"messages": USER, "data_parallel_rank": 1}, "data_parallel_rank", "one data-parallel rank"),
    (CHAT, {"messages": USER, "no_stop_trim": True}, "no_stop_trim", "does not support"),
    (COMPLETIONS, {"prompt": "x", "logprobs": 6}, "logprobs", "5"),
    (COMPLETIONS, {"prompt": "x", "suffix": "y"}, "suffix", "does not support"),
    ("/generate", {"text": "x", "max_tokens": 3}, "max_tokens", "Unrecognized request argument"),
    ("/generate", {"text": "x", "return_logprob": True, "logprob_start_len": -2}, "logprob_start_len",
     "greater than or equal to -1"),
])
def test_unsupported_and_unknown_fields_are_refused_by_name(http, path, body, param, words):
    resp = http.post(path, json=body)
    assert resp.status_code == 400, resp.text
    error = resp.json()["error"]
    assert error["param"] == param and words in error["message"] and error["type"] == "invalid_request_error"


def test_router_fields_and_harmless_values_are_accepted(http, model):
    router = {"bootstrap_host": "10.0.0.1", "bootstrap_port": 8998, "bootstrap_room": 2**62, "data_parallel_rank": 0,
              "routed_dp_rank": 0}
    chat = http.post(CHAT, json={"model": model, "messages": USER, "max_tokens": 1, **router, "store": False,
                                 "tools": None, "user": "u1", "stream_options": None})
    assert chat.status_code == 200, chat.text
    gen = http.post("/generate", json={"text": "Hi", "sampling_params": {"max_new_tokens": 1}, **router})
    assert gen.status_code == 200, gen.text
    # a server of its own ignores the room: only the halves of a PD pair are named after it (pd-<room>), and
    # these two requests, which carry the same room, would otherwise share a rid
    assert chat.json()["id"] != f"chatcmpl-pd-{2**62}" and gen.json()["meta_info"]["id"] != f"pd-{2**62}"


def _reference(hf_model_fp32, prompt_ids: list[int], output_ids: list[int]) -> torch.Tensor:
    """transformers' log_softmax at the positions that chose each output token: [len(output_ids), vocab]."""
    ids = torch.tensor([prompt_ids + output_ids])
    with torch.inference_mode():
        logits = hf_model_fp32(ids, attention_mask=torch.ones_like(ids)).logits[0].float()
    return torch.log_softmax(logits[len(prompt_ids) - 1: -1], dim=-1)


def test_chat_logprobs_equal_log_softmax_of_the_logits_streamed_or_not(client, model, engine, hf_model_fp32):
    ref = engine.generate(USER, {"max_new_tokens": 8, "temperature": 0}, return_logprob=True, top_logprobs_num=3)
    kwargs = {"model": model, "messages": USER, "max_tokens": 8, "logprobs": True, "top_logprobs": 3}
    # logprobs are of the raw logits: a temperature changes the draw, not them (greedy via top_k 1 here)
    resp = client.chat.completions.create(**kwargs, temperature=0.5, extra_body={"top_k": 1})
    content = resp.choices[0].logprobs.content
    assert resp.choices[0].message.content == ref["text"]
    ids = ref["output_ids"]
    assert len(content) == len(ids) == resp.usage.completion_tokens  # a final stop token included, as SGLang
    stop = engine.tokenizer.decode(ids[-1:]) if ref["finish_reason"]["type"] == "stop" else ""
    assert "".join(e.token for e in content) == ref["text"] + stop
    prompt_ids = engine.tokenizer.apply_chat_template(USER, add_generation_prompt=True, tokenize=True,
                                                      return_dict=False)
    expected = _reference(hf_model_fp32, prompt_ids, ids)
    for row, entry, tid, (lp, _, _) in zip(expected, content, ids, ref["output_token_logprobs"]):
        assert entry.logprob == pytest.approx(row[tid].item(), abs=2e-3) and entry.logprob == pytest.approx(lp, abs=1e-5)
        assert entry.bytes == list(entry.token.encode())
        tops = entry.top_logprobs
        assert [t.logprob for t in tops] == sorted((t.logprob for t in tops), reverse=True) and len(tops) == 3
        assert [t.logprob for t in tops] == pytest.approx(row.topk(3).values.tolist(), abs=2e-3)
        assert tops[0].token == entry.token and tops[0].logprob == pytest.approx(entry.logprob, abs=1e-4)  # greedy
        assert sum(math.exp(t.logprob) for t in tops) <= 1 + 1e-6
    chunks = list(client.chat.completions.create(**kwargs, temperature=0, stream=True))
    streamed = [e for c in chunks if c.choices and c.choices[0].logprobs for e in c.choices[0].logprobs.content]
    assert [(e.token, round(e.logprob, 4)) for e in streamed] == [(e.token, round(e.logprob, 4)) for e in content]


def test_completion_logprobs_echo_and_generate_return_logprob(client, model, http):
    prompt = "The capital of France is"
    resp = client.completions.create(model=model, prompt=prompt, max_tokens=6, temperature=0, logprobs=2)
    choice = resp.choices[0]
    lp = choice.logprobs
    assert "".join(lp.tokens) == choice.text and len(lp.tokens) == len(lp.token_logprobs) == 6
    assert lp.text_offset == [sum(len(t) for t in lp.tokens[:i]) for i in range(6)]
    for token, logprob, top in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs):
        assert len(top) == 2 and top[token] == pytest.approx(logprob) and max(top.values()) == top[token]
    chunks = list(client.completions.create(model=model, prompt=prompt, max_tokens=6, temperature=0, logprobs=2,
                                            stream=True))
    assert [t for c in chunks if c.choices[0].logprobs for t in c.choices[0].logprobs.tokens] == lp.tokens
    assert [o for c in chunks if c.choices[0].logprobs for o in c.choices[0].logprobs.text_offset] == lp.text_offset

    echoed = client.completions.create(model=model, prompt=prompt, max_tokens=6, temperature=0, echo=True)
    assert echoed.choices[0].text == prompt + choice.text and echoed.choices[0].logprobs is None
    chunks = list(client.completions.create(model=model, prompt=prompt, max_tokens=6, temperature=0, echo=True,
                                            stream=True))
    assert chunks[0].choices[0].text.startswith(prompt)
    assert "".join(c.choices[0].text for c in chunks) == prompt + choice.text

    body = {"text": prompt, "sampling_params": {"max_new_tokens": 6, "temperature": 0}, "return_logprob": True,
            "top_logprobs_num": 2, "return_text_in_logprobs": True}
    meta = http.post("/generate", json=body).json()["meta_info"]
    assert [t for _, _, t in meta["output_token_logprobs"]] == lp.tokens
    assert [v for v, _, _ in meta["output_token_logprobs"]] == pytest.approx(lp.token_logprobs, abs=1e-5)
    assert [len(top) for top in meta["output_top_logprobs"]] == [2] * 6


def test_no_max_tokens_runs_to_the_end_of_the_context(client, model):
    """The test server's context is 1024 tokens; a long prompt leaves a few, and without max_tokens (and with
    ignore_eos) the answer takes all of them, ends with "length" and has no clamping warning. /generate keeps
    SGLang's native default of 128, as the offline Engine does. (The prompt is test_openai_api's clamping
    one: the radix cache shares its prefill.)"""
    prompt = [1] + [2683] * 1015
    resp = client.completions.create(model=model, prompt=prompt, temperature=0, extra_body={"ignore_eos": True})
    assert resp.usage.prompt_tokens == 1016 and resp.usage.completion_tokens == 1024 - 1016
    assert resp.choices[0].finish_reason == "length" and "warning" not in (resp.model_extra or {})


def test_echo_with_logprobs_scores_the_prompt_as_evaluation_harnesses_ask(client, model, engine, hf_model_fp32):
    """What lm-evaluation-harness's local-completions sends to score a continuation: the prompt as token ids,
    echo, logprobs, max_tokens 1. The prompt tokens' logprobs equal transformers' log_softmax (the first is
    null), each position's top_logprobs has its best tokens, and streamed they are the same."""
    ids = engine.tokenizer.encode("Question: what colour is the sky? Answer: blue")
    resp = client.completions.create(model=model, prompt=ids, max_tokens=1, temperature=0, echo=True, logprobs=2)
    lp = resp.choices[0].logprobs
    assert len(lp.tokens) == len(ids) + 1 and lp.token_logprobs[0] is None and lp.top_logprobs[0] is None
    expected = _reference(hf_model_fp32, ids[:1], ids[1:])  # row k scores prompt token k + 1
    for k in range(1, len(ids)):
        assert lp.token_logprobs[k] == pytest.approx(expected[k - 1][ids[k]].item(), abs=2e-3)
        top = lp.top_logprobs[k]
        assert lp.tokens[k] in top and max(top.values()) == pytest.approx(expected[k - 1].max().item(), abs=2e-3)
    assert resp.choices[0].text == engine.tokenizer.decode(ids) + lp.tokens[-1]
    assert lp.text_offset == [sum(len(t) for t in lp.tokens[:i]) for i in range(len(lp.tokens))]
    chunks = list(client.completions.create(model=model, prompt=ids, max_tokens=1, temperature=0, echo=True,
                                            logprobs=2, stream=True))
    streamed = [v for c in chunks if c.choices[0].logprobs for v in c.choices[0].logprobs.token_logprobs]
    assert streamed == lp.token_logprobs
