"""The detokenizer process, seen from a client: text arrives whole-character and stop-trimmed.

The model is English-only, but a prompt of repeated Chinese sentences makes it continue in Chinese, and
its byte-level tokens end inside characters (a token alone decodes to U+FFFD). Greedy decoding makes the
output fixed, so the test checks that the case really occurs before checking the stream.
"""

from __future__ import annotations

import json

REPLACEMENT = "\ufffd"
CHINESE = "北京是中国的首都。上海是中国最大的城市。北京是中国的首都。上海是"
CAPITAL = [{"role": "user", "content": "What is the capital of China?"}]


def _generate_stream(http, body: dict) -> list[dict]:
    with http.stream("POST", "/generate", json={**body, "stream": True}) as resp:
        assert resp.status_code == 200
        return [json.loads(line[6:]) for line in resp.iter_lines() if line.startswith("data: {")]


def test_chinese_stream_never_shows_a_broken_character(http, engine):
    params = {"max_new_tokens": 14, "temperature": 0}
    ref = engine.generate(CHINESE, params)
    split = [t for t in ref["output_ids"] if REPLACEMENT in engine.tokenizer.decode([t])]
    assert split, "the model's answer has no token that ends inside a character: nothing to test"
    assert REPLACEMENT not in ref["text"]

    chunks = _generate_stream(http, {"text": CHINESE, "sampling_params": params})
    assert all(REPLACEMENT not in c["text"] for c in chunks)
    assert chunks[-1]["text"] == ref["text"] and chunks[-1]["output_ids"] == ref["output_ids"]
    # the held-back tokens arrive together with the one that completes their character
    grew = [b["text"] != a["text"] for a, b in zip([{"text": ""}] + chunks, chunks)]
    assert not all(grew)


def test_stop_string_split_across_two_tokens_is_trimmed_from_the_stream(client, model):
    # greedy answer: "The capital of China is Beijing."; " China" and " is" are two tokens, and the
    # detokenizer must hold back "China" until " is" shows it is the start of the stop string
    stream = client.chat.completions.create(model=model, messages=CAPITAL, temperature=0, max_tokens=16,
                                            stop=["China is"], stream=True)
    pieces, reasons = [], []
    for chunk in stream:
        if chunk.choices:
            pieces.append(chunk.choices[0].delta.content or "")
            reasons.append(chunk.choices[0].finish_reason)
    assert "".join(pieces) == "The capital of "
    assert not any("China" in p for p in pieces)
    assert reasons[-1] == "stop"
