"""Finish reasons, aborts, refusals, context limits and sampling, through the offline Engine."""

from __future__ import annotations

import pytest

from minisgl.scheduler.io_struct import TokenizedGenerateReqInput
from minisgl.server.protocol import GenerateReqInput
from tracer.reader import load_trace

from .conftest import assert_no_leak, chat

GREEDY = {"max_new_tokens": 12, "temperature": 0}


@pytest.fixture(scope="module")
def engine(base_engine):
    return base_engine.fork(chunked_prefill_size=16)


def test_finish_by_eos_and_by_length(engine):
    out = engine.generate(chat("What is the capital of China?"), {"max_new_tokens": 40, "temperature": 0})
    assert out["text"] == "The capital of China is Beijing."
    assert out["finish_reason"] == {"type": "stop", "matched": 2}
    out = engine.generate(chat("Write a haiku about the sea."), {"max_new_tokens": 5, "temperature": 0})
    assert out["finish_reason"] == {"type": "length", "length": 5}
    assert out["usage"]["completion_tokens"] == 5
    assert_no_leak(engine)


def test_stop_string_and_stop_token(engine):
    base = engine.generate(chat("What is the capital of China?"), GREEDY)
    out = engine.generate(chat("What is the capital of China?"), {**GREEDY, "stop": [" is"]})
    assert out["finish_reason"]["type"] == "stop" and out["finish_reason"]["matched"] == " is"
    assert out["text"] == base["text"].split(" is")[0]
    stop_id = base["output_ids"][2]
    out = engine.generate(chat("What is the capital of China?"), {**GREEDY, "stop_token_ids": [stop_id]})
    assert out["output_ids"] == base["output_ids"][:3]
    assert out["finish_reason"] == {"type": "stop", "matched": stop_id}
    assert_no_leak(engine)


def test_abort_mid_decode_frees_everything(engine):
    stream = engine.generate(chat("Write a haiku about the sea."), {"max_new_tokens": 50, "temperature": 0},
                             stream=True, rid="to-abort")
    chunks = []
    for chunk in stream:
        chunks.append(chunk)
        if len(chunks) == 3:
            engine.abort("to-abort")
    assert chunks[-1]["finish_reason"]["type"] == "abort"
    assert len(chunks) < 10  # aborted within a few rounds
    assert_no_leak(engine)


def test_abort_while_waiting(engine):
    small = engine.fork(max_running_requests=1)
    params = {"max_new_tokens": 8, "temperature": 0, "ignore_eos": True}
    states = {rid: small.submit(GenerateReqInput(rid=rid, input_ids=small.tokenizer.encode(q),
                                                 sampling_params=params))
              for rid, q in [("a", "Tell me a story."), ("b", "Count to five.")]}
    small.step()  # "a" is admitted, "b" waits (one running request at most)
    assert [r.rid for r in small.scheduler.waiting_queue] == ["b"]
    small.abort("b")
    while not all(state.finished for state in states.values()):
        small.step()
    assert states["b"].meta_info["finish_reason"]["type"] == "abort"
    assert states["a"].meta_info["finish_reason"]["type"] == "length"
    assert_no_leak(small)


def test_stopping_a_stream_early_aborts_it(engine):
    for i, _ in enumerate(engine.generate(chat("Count to fifty."), {"max_new_tokens": 60}, stream=True)):
        if i == 2:
            break
    assert_no_leak(engine)


def test_context_length_refusal_and_clamp(base_engine):
    engine = base_engine.fork(context_length=48)
    ids = engine.tokenizer.encode("word " * 60)[:48]
    with pytest.raises(ValueError) as err:
        engine.generate(input_ids=ids, sampling_params=GREEDY)
    assert "48 tokens" in str(err.value) and "at most 47" in str(err.value)
    out = engine.generate(input_ids=ids[:40], sampling_params={"max_new_tokens": 100, "temperature": 0,
                                                               "ignore_eos": True})
    assert out["usage"]["completion_tokens"] == 8
    assert "clamped to 8" in out["warning"]
    assert_no_leak(engine)


@pytest.mark.parametrize("params, field", [
    ({"temperature": -1}, "temperature"),
    ({"top_p": 0}, "top_p"),
    ({"top_k": 0}, "top_k"),
    ({"min_p": 2}, "min_p"),
    ({"max_new_tokens": 0}, "max_new_tokens"),
    ({"bogus": 1}, "bogus"),
])
def test_bad_sampling_params_are_clear_errors(engine, params, field):
    with pytest.raises(ValueError, match=field):
        engine.generate(chat("Hi"), params)
    assert_no_leak(engine)


def test_duplicate_rid_refused(engine):
    with pytest.raises(ValueError, match="duplicate"):
        engine.generate([chat("Hi"), chat("Hello")], GREEDY, rid=["same", "same"])
    assert_no_leak(engine)  # refused before anything was sent
    # the scheduler itself refuses a rid that is still running (the server has no Engine in front)
    params = {"max_new_tokens": 4, "temperature": 0}
    for ids in ([1, 2, 3], [1, 2]):
        engine._to_scheduler.send(TokenizedGenerateReqInput(rid="dup", input_text=None, input_ids=ids,
                                                            sampling_params=params))
    reasons = []
    while not reasons or not engine.scheduler.is_idle():
        engine.scheduler.run_one_round()
        reasons += [r for out in engine._to_detokenizer.recv_all() for r in out.finished_reasons if r]
    assert any(r.get("status_code") == 400 and "duplicate" in r["message"] for r in reasons)
    assert_no_leak(engine)


def test_sampling_determinism(engine, tmp_path):
    """Settings that leave one candidate give the greedy tokens: temperature 0 whatever else is set, and at
    temperature 1 top_k 1, top_p 1e-6 or min_p 1 (each through its own path of the sampler). Without them the
    same seed 7 draws other tokens, so each of these can fail. A seed decides the draws: the same seed gives
    the same tokens alone and in batches shared with an unseeded sampled request, and other seeds give other
    tokens."""
    q = chat("Write a haiku about the sea.")
    greedy = engine.generate(q, GREEDY)["output_ids"]
    one_candidate = [
        {**GREEDY, "temperature": 0, "top_k": 5, "top_p": 0.5, "min_p": 0.1, "seed": 7},
        {**GREEDY, "temperature": 1.0, "top_k": 1, "seed": 7},  # the greedy path (is_greedy)
        {**GREEDY, "temperature": 1.0, "top_p": 1e-6, "seed": 7},  # a sorted draw
        {**GREEDY, "temperature": 1.0, "min_p": 1.0, "seed": 7},  # an unsorted draw
    ]
    # one batch: each row takes its own path through the sampler, whatever its batch-mates are
    unfiltered = {**GREEDY, "temperature": 1.0, "seed": 7}
    outs = engine.generate([q] * (len(one_candidate) + 1), one_candidate + [unfiltered])
    for params, out in zip(one_candidate, outs):
        assert out["output_ids"] == greedy, params
    assert outs[-1]["output_ids"] != greedy

    seeded = {"max_new_tokens": 12, "temperature": 1.0, "top_p": 0.95, "seed": 1234}
    a = engine.generate(q, seeded)["output_ids"]
    # the same seed gives the same tokens when another request, sampled from the shared stream, is batched
    # with it (a fork of the same engine that writes a trace, to show they shared batches)
    traced = engine.fork(trace_dir=str(tmp_path), trace_level=1)
    try:
        mate = {"max_new_tokens": 12, "temperature": 1.0, "top_p": 0.95}
        b, _ = traced.generate([q, chat("List three prime numbers.")], [seeded, mate], rid=["seeded", "mate"])
    finally:
        traced.shutdown()
    assert a == b["output_ids"]
    shared = [ev for ev in load_trace(tmp_path).events
              if ev.name == "sched.batch_formed" and set(ev.rids) == {"seeded", "mate"}]
    assert shared and any(ev.get("forward_mode") == "DECODE" for ev in shared)
    others = {tuple(o["output_ids"]) for o in engine.generate([q] * 3, [{**seeded, "seed": s} for s in range(3)])}
    assert len(others) > 1
    assert_no_leak(engine)
    assert_no_leak(traced)
