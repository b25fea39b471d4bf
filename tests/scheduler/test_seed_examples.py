"""The seeds' worked examples, with real token ids: one request's prefill then decode, and R1/R2
sharing a prefix in one EXTEND of nine rows with two logit rows, then a DECODE of two rows."""

from __future__ import annotations

import pytest
import torch

from minisgl.model_executor.forward_batch_info import ForwardBatch, ForwardMode
from minisgl.scheduler.io_struct import TokenizedGenerateReqInput

from .conftest import assert_no_leak


@pytest.fixture
def engine(base_engine):
    engine = base_engine.fork(chunked_prefill_size=-1)
    logit_rows: list[int] = []
    forward = engine.model_runner.forward

    def recording_forward(fb):
        logits = forward(fb)
        logit_rows.append(logits.shape[0])
        return logits

    engine.model_runner.forward = recording_forward
    engine.logit_rows = logit_rows
    return engine


def submit(engine, rid: str, ids: list[int], max_new_tokens: int) -> None:
    params = {"max_new_tokens": max_new_tokens, "temperature": 0, "ignore_eos": True}
    engine._to_scheduler.send(TokenizedGenerateReqInput(rid, None, ids, params))


def run_round(engine):
    batch = engine.scheduler.run_one_round()
    fb = ForwardBatch.init_new(batch, engine.model_runner)
    return batch, fb


def test_one_request_prefill_then_decode(engine):
    ids = engine.tokenizer.encode("The capital of France is", add_special_tokens=False)
    n = len(ids)
    submit(engine, "R", ids, max_new_tokens=3)
    batch, fb = run_round(engine)
    assert batch.forward_mode == ForwardMode.EXTEND
    assert fb.positions.tolist() == list(range(n))
    assert batch.input_ids == ids
    assert engine.logit_rows[-1] == 1
    req = batch.reqs[0]
    first = req.output_ids[0]

    batch, fb = run_round(engine)
    assert batch.forward_mode == ForwardMode.DECODE
    assert batch.input_ids == [first]
    assert fb.positions.tolist() == [n]
    assert batch.seq_lens == [n + 1]
    # the new row's KV slot is recorded at logical position n of the request's req_to_token row
    row = engine.model_runner.req_to_token_pool.req_to_token[req.req_pool_idx]
    assert int(row[n]) == int(batch.out_cache_loc[0])
    while not engine.scheduler.is_idle():
        engine.scheduler.run_one_round()
    assert len(req.output_ids) == 3
    assert_no_leak(engine)


def test_r1_r2_shared_prefix_nine_rows_two_logits(engine):
    tok = engine.tokenizer
    shared = tok.encode(" red green blue", add_special_tokens=False)[:3]
    r1 = tok.encode(" one two three four five six", add_special_tokens=False)[:6]
    r2 = shared + tok.encode(" cat dog fish", add_special_tokens=False)[:3]
    assert len(shared) == 3 and len(r1) == 6 and len(r2) == 6
    # R0 leaves `shared` in the radix cache, as an earlier request would
    submit(engine, "R0", shared + r1[:1], max_new_tokens=1)
    engine.scheduler.run_one_round()
    assert engine.scheduler.tree_cache.match_prefix(r2[:5]).device_indices.numel() == 3

    submit(engine, "R1", r1, max_new_tokens=2)
    submit(engine, "R2", r2, max_new_tokens=2)
    batch, fb = run_round(engine)
    assert batch.forward_mode == ForwardMode.EXTEND
    assert [r.rid for r in batch.reqs] == ["R1", "R2"]
    assert batch.seq_lens == [6, 6]
    assert batch.prefix_lens == [0, 3]
    assert batch.extend_lens == [6, 3]
    assert len(batch.input_ids) == 9
    assert batch.input_ids == r1 + r2[3:]
    assert fb.positions.tolist() == [0, 1, 2, 3, 4, 5, 3, 4, 5]
    assert fb.extend_start_loc == [0, 6]
    assert len(set(batch.out_cache_loc.tolist())) == 9
    assert engine.logit_rows[-1] == 2
    # R2's first three positions read the KV slots R0 left in the cache
    r2_row = engine.model_runner.req_to_token_pool.req_to_token[batch.reqs[1].req_pool_idx, :6]
    assert torch.equal(r2_row[:3], batch.reqs[1].prefix_indices[:3])
    t1, t2 = (r.output_ids[0] for r in batch.reqs)

    batch, fb = run_round(engine)
    assert batch.forward_mode == ForwardMode.DECODE
    assert batch.input_ids == [t1, t2]
    assert fb.positions.tolist() == [6, 6]
    assert batch.seq_lens == [7, 7]
    assert engine.logit_rows[-1] == 2
    assert all(r.finished() for r in batch.reqs)
    assert engine.scheduler.run_one_round() is None  # the finished requests leave running_batch
    assert_no_leak(engine)
