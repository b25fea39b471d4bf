"""Penalties (sampling/penaltylib.py) on the real engine. The repetition penalty against the outside referee,
transformers' own RepetitionPenaltyLogitsProcessor: the same greedy tokens in float32. Frequency and
presence penalties change only the rows that ask (a batch-mate without them is untouched), and
min_new_tokens keeps the end of sequence away until enough tokens are out."""

from __future__ import annotations

import pytest
import torch

from minisgl.server.errors import RequestError

NEW = 16


@pytest.fixture(scope="module")
def engine(base_engine):
    return base_engine.fork()


def test_repetition_penalty_gives_transformers_greedy_tokens(engine, hf_model_fp32, chat_prompt_ids):
    for prompt in chat_prompt_ids[:2]:
        ids = torch.tensor([prompt])
        with torch.inference_mode():
            want = hf_model_fp32.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=NEW,
                                          do_sample=False, repetition_penalty=1.3)[0, len(prompt):].tolist()
        got = engine.generate(input_ids=prompt, sampling_params={
            "temperature": 0, "max_new_tokens": NEW, "ignore_eos": True, "repetition_penalty": 1.3})
        plain = engine.generate(input_ids=prompt, sampling_params={
            "temperature": 0, "max_new_tokens": NEW, "ignore_eos": True})
        assert got["output_ids"] == want
        assert got["output_ids"] != plain["output_ids"], "the penalty changed this answer"


def test_frequency_and_presence_penalties_touch_their_own_rows_only(engine):
    greedy = {"temperature": 0, "max_new_tokens": 24, "ignore_eos": True}
    prompt = "List the numbers: one, one, one, one,"
    alone = engine.generate(prompt, greedy)
    both = engine.generate([prompt, prompt], [greedy, {**greedy, "frequency_penalty": 2.0}])
    assert both[0]["output_ids"] == alone["output_ids"]
    penalized = both[1]["output_ids"]
    assert penalized != alone["output_ids"]
    assert max(penalized.count(t) for t in set(penalized)) < max(alone["output_ids"].count(t)
                                                                  for t in set(alone["output_ids"]))
    present = engine.generate(prompt, {**greedy, "presence_penalty": 2.0})["output_ids"]
    assert present != alone["output_ids"]


def test_min_new_tokens_holds_the_end_of_sequence_back(engine):
    prompt = [{"role": "user", "content": "What is the capital of France?"}]
    short = engine.generate(prompt, {"temperature": 0, "max_new_tokens": 64})
    assert short["finish_reason"]["type"] == "stop"
    n = short["usage"]["completion_tokens"]
    held = engine.generate(prompt, {"temperature": 0, "max_new_tokens": 64, "min_new_tokens": n + 5})
    assert held["usage"]["completion_tokens"] >= n + 5
    assert held["output_ids"][:n - 1] == short["output_ids"][:n - 1], "the same answer up to its end"


def test_out_of_range_and_unfit_loops_are_refused(base_engine, engine):
    with pytest.raises(RequestError, match="repetition_penalty"):
        engine.generate("x", {"repetition_penalty": 0})
    with pytest.raises(RequestError, match="frequency_penalty"):
        engine.generate("x", {"frequency_penalty": 3})
    overlap = base_engine.fork(enable_overlap_schedule=True)
    try:
        with pytest.raises(RequestError, match="penalties"):
            overlap.generate("x", {"presence_penalty": 1.0})
    finally:
        overlap.shutdown()
