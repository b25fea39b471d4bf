"""The seeds' worked examples, with real token ids: one request's prefill then decode, and R1/R2
sharing a prefix in one EXTEND of nine rows with two logit rows, then a DECODE of two rows.

Each round is checked three ways: the ScheduleBatch the scheduler returns (and a ForwardBatch built from
it), the level-3 trace of that round (`sched.batch_formed`'s `logit_rows`, `model.forward`'s `positions`:
what the model was given), and, for the EXTENDs, the real ModelRunner's logits for that ForwardBatch: one
row per request, whose argmax is the token the request got."""

from __future__ import annotations

import pytest
import torch

from minisgl.model_executor.forward_batch_info import ForwardBatch, ForwardMode
from minisgl.scheduler.io_struct import TokenizedGenerateReqInput
from tracer.reader import load_trace

from .conftest import assert_no_leak


@pytest.fixture
def engine(base_engine, tmp_path):
    """A fork that writes a level-3 trace to tmp_path (flushed at the end of every round)."""
    engine = base_engine.fork(trace_dir=str(tmp_path), trace_level=3, chunked_prefill_size=-1)
    engine.trace_dir = tmp_path
    yield engine
    engine.shutdown()  # stops the tracer, so later tests write no trace here


def submit(engine, rid: str, ids: list[int], max_new_tokens: int) -> None:
    params = {"max_new_tokens": max_new_tokens, "temperature": 0, "ignore_eos": True}
    engine._to_scheduler.send(TokenizedGenerateReqInput(rid=rid, input_text=None, input_ids=ids,
                                                            sampling_params=params))


def run_round(engine):
    batch = engine.scheduler.run_one_round()
    fb = ForwardBatch.init_new(batch, engine.model_runner)
    return batch, fb


def traced_round(engine, rids: list[str], mode: ForwardMode) -> tuple[dict, dict]:
    """The trace's record of the round just run: the attrs of its `sched.batch_formed` (which must be a
    `mode` batch of `rids`) and of the begin of its `model.forward` span."""
    trace = load_trace(engine.trace_dir)
    formed = [ev for ev in trace.events if ev.name == "sched.batch_formed"][-1]
    assert formed.rids == rids and formed.get("forward_mode") == mode.name
    forward = [ev for ev in trace.events_in_round(formed.round)
               if ev.name == "model.forward" and ev.ph == "B"]
    assert len(forward) == 1 and forward[0].rids == rids
    return formed.attrs, forward[0].attrs


def model_rows(engine, fb: ForwardBatch) -> tuple[torch.Tensor, torch.Tensor]:
    """The real ModelRunner's logits for this round's ForwardBatch, run again (it writes the same KV to the
    same slots), and every row's vocabulary logits (the model's hidden states times lm_head), to see which
    rows the returned logits are: a cross-check with the real model, not read from the trace."""
    runner = engine.model_runner
    logits = runner.forward(fb)
    with torch.inference_mode():
        hidden = runner.model.model(fb.input_ids, fb.positions, fb)
        every_row = torch.nn.functional.linear(hidden, runner.model.lm_head_weight()).float()
    return logits, every_row


def test_one_request_prefill_then_decode(engine):
    ids = engine.tokenizer.encode("The capital of France is", add_special_tokens=False)
    n = len(ids)
    submit(engine, "R", ids, max_new_tokens=3)
    batch, fb = run_round(engine)
    assert batch.forward_mode == ForwardMode.EXTEND
    assert fb.positions.tolist() == list(range(n))
    assert batch.input_ids == ids
    formed, forward = traced_round(engine, ["R"], ForwardMode.EXTEND)
    assert formed["logit_rows"] == [n - 1]  # one logit row: the prompt's last
    assert forward["positions"] == list(range(n)) and forward["input_ids"] == ids
    req = batch.reqs[0]
    first = req.output_ids[0]
    logits, every_row = model_rows(engine, fb)
    assert logits.shape == (1, engine.model_config.vocab_size)
    torch.testing.assert_close(logits, every_row[formed["logit_rows"]], rtol=1e-4, atol=1e-3)
    assert logits.argmax(-1).tolist() == [first]

    batch, fb = run_round(engine)
    assert batch.forward_mode == ForwardMode.DECODE
    assert batch.input_ids == [first]
    assert fb.positions.tolist() == [n]
    assert batch.seq_lens == [n + 1]
    formed, forward = traced_round(engine, ["R"], ForwardMode.DECODE)
    assert formed["logit_rows"] == [0] and forward["positions"] == [n]
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
    formed, forward = traced_round(engine, ["R1", "R2"], ForwardMode.EXTEND)
    # nine rows in, two logit rows out: R1's last (row 5) and R2's last (row 8)
    assert formed["out_cache_loc"] == batch.out_cache_loc.tolist() and formed["logit_rows"] == [5, 8]
    assert forward["positions"] == [0, 1, 2, 3, 4, 5, 3, 4, 5] and forward["input_ids"] == r1 + r2[3:]
    # R2's first three positions read the KV slots R0 left in the cache
    r2_row = engine.model_runner.req_to_token_pool.req_to_token[batch.reqs[1].req_pool_idx, :6]
    assert torch.equal(r2_row[:3], batch.reqs[1].prefix_indices[:3])
    reqs = list(batch.reqs)
    t1, t2 = (r.output_ids[0] for r in reqs)
    logits, every_row = model_rows(engine, fb)
    assert logits.shape == (2, engine.model_config.vocab_size) and every_row.shape[0] == 9
    torch.testing.assert_close(logits, every_row[formed["logit_rows"]], rtol=1e-4, atol=1e-3)
    assert logits.argmax(-1).tolist() == [t1, t2]

    batch, fb = run_round(engine)
    assert batch.forward_mode == ForwardMode.DECODE
    assert batch.input_ids == [t1, t2]
    assert fb.positions.tolist() == [6, 6]
    assert batch.seq_lens == [7, 7]
    formed, forward = traced_round(engine, ["R1", "R2"], ForwardMode.DECODE)
    assert formed["logit_rows"] == [0, 1] and forward["positions"] == [6, 6]
    # both finished with their two tokens and left the batch in this round (batch.reqs is now empty, so
    # the requests are the ones kept from the EXTEND)
    assert batch.reqs == [] and all(r.finished() and len(r.output_ids) == 2 for r in reqs)
    assert engine.scheduler.run_one_round() is None  # the finished requests leave running_batch
    assert_no_leak(engine)


def test_two_prompts_of_four_and_three_tokens_packed_in_one_extend(engine):
    """Seed 004's packed batch: two new requests of 4 and 3 tokens in one EXTEND of 7 rows. Each has its own
    req_to_token row (its 4 or 3 KV slots), the rows start at [0, 4] (with the end, SGLang's cumulative
    lengths [0, 4, 7]), positions restart at 0 for the second, and each request attends to its own tokens
    only: its logits equal those of the same prompt run alone."""
    tok = engine.tokenizer
    a = tok.encode(" red green blue yellow", add_special_tokens=False)[:4]
    b = tok.encode(" one two three", add_special_tokens=False)[:3]
    assert len(a) == 4 and len(b) == 3
    submit(engine, "A", a, max_new_tokens=2)  # two tokens: their rows still hold their slots after round 1
    submit(engine, "B", b, max_new_tokens=2)
    batch, fb = run_round(engine)
    assert batch.forward_mode == ForwardMode.EXTEND and [r.rid for r in batch.reqs] == ["A", "B"]
    assert (batch.prefix_lens, batch.extend_lens, batch.seq_lens) == ([0, 0], [4, 3], [4, 3])
    assert batch.input_ids == a + b
    assert fb.extend_start_loc == [0, 4] and fb.extend_start_loc + [sum(batch.extend_lens)] == [0, 4, 7]
    assert fb.positions.tolist() == [0, 1, 2, 3, 0, 1, 2]
    slots = batch.out_cache_loc.tolist()
    req_to_token = engine.model_runner.req_to_token_pool.req_to_token
    rows = [req_to_token[r.req_pool_idx, : len(p)].tolist() for r, p in zip(batch.reqs, (a, b))]
    assert rows == [slots[:4], slots[4:]], "each request's req_to_token row holds its own rows' KV slots"
    formed, forward = traced_round(engine, ["A", "B"], ForwardMode.EXTEND)
    assert formed["logit_rows"] == [3, 6] and formed["out_cache_loc"] == slots
    assert forward["positions"] == [0, 1, 2, 3, 0, 1, 2]
    packed, _ = model_rows(engine, fb)
    while not engine.scheduler.is_idle():
        engine.scheduler.run_one_round()

    # each prompt alone, in a fork with the radix cache off (nothing of A's or B's is reused)
    alone = []
    for rid, ids in (("A1", a), ("B1", b)):
        single = engine.fork(disable_radix_cache=True)
        submit(single, rid, ids, max_new_tokens=1)
        _, fb1 = run_round(single)
        alone.append(model_rows(single, fb1)[0][0])
        single.shutdown()
    torch.testing.assert_close(packed, torch.stack(alone), rtol=1e-4, atol=1e-3)
    assert_no_leak(engine)
