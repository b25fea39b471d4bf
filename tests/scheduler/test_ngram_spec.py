"""N-gram speculative decoding (--speculative-algorithm NGRAM) changes how many tokens a round yields, never
which: greedy tokens and finish reasons equal the plain engine's, with the radix cache, chunked prompts,
retraction, stop strings and max_new_tokens landing inside accepted drafts — and drafts are really accepted
on text that repeats. Its traces pass `minisgl trace check`, and replay shows the draft rows."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from minisgl.cli import main
from minisgl.layers.linear import onednn_packing_available
from minisgl.server_args import ServerArgs
from minisgl.scheduler.utils import GenerationBatchResult
from minisgl.speculative.ngram_match import match_ngram_draft
from minisgl.speculative.ngram_worker import accept_lengths
from tests.tracer.live import Arrival, assert_replay_is_live, drive
from tracer.check import check_trace
from tracer.diagrams.round_table import table_rows
from tracer.reader import load_trace
from tracer.replay import replay
from tracer.show import show

from .conftest import assert_no_leak, chat

ROOT = Path(__file__).resolve().parents[2]
SPEC = dict(speculative_algorithm="NGRAM", speculative_num_draft_tokens=4)
SENTENCE = ("Alice packed three apples, two pears and a loaf of bread into her basket, then walked to the old "
            "mill by the river to meet her brother Tom.")
COPY = chat("Copy the following sentence word for word:\n" + SENTENCE)
DAYS = "Monday, Tuesday, Wednesday, Thursday, Friday. Monday, Tuesday, Wednesday, Thursday, Friday. Monday,"
PROMPTS = [COPY, DAYS, chat("Write a haiku about the sea."), chat("List three prime numbers.")]
PARAMS = {"max_new_tokens": 32, "temperature": 0}


def outputs(engine, prompts, params, rids=None) -> list[tuple[list[int], dict]]:
    return [(o["output_ids"], o["finish_reason"]) for o in engine.generate(prompts, params, rid=rids)]


@pytest.fixture(scope="module")
def plain(base_engine):
    """The same workload without speculation: the answers speculation must reproduce."""
    engine = base_engine.fork()
    return outputs(engine, PROMPTS, PARAMS)


# ---- flags ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("flags, message", [
    (dict(speculative_algorithm="EAGLE"), "--speculative-algorithm must be NGRAM, not 'EAGLE'"),
    (dict(speculative_num_draft_tokens=0), "--speculative-num-draft-tokens must be >= 1, not 0"),
    (dict(speculative_ngram_min_match_window_size=0), "--speculative-ngram-min-match-window-size (0) must be"),
    (dict(speculative_ngram_min_match_window_size=5, speculative_ngram_max_match_window_size=4),
     "--speculative-ngram-min-match-window-size (5) must be >= 1 and at most --speculative-ngram-max-match"),
])
def test_bad_flags_are_refused_with_the_flag_named(flags, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        ServerArgs(**{"speculative_algorithm": "NGRAM", **flags}).validate()


def test_bad_flag_on_the_command_line_is_one_line():
    r = subprocess.run([sys.executable, "-m", "minisgl.cli", "generate", "hi", "--speculative-algorithm", "NGRAM",
                        "--speculative-num-draft-tokens", "0"], cwd=ROOT, text=True, capture_output=True,
                       timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 2
    assert r.stderr.splitlines() == ["minisgl generate: error: --speculative-num-draft-tokens must be >= 1, not 0"]


# ---- the proposer ---------------------------------------------------------------------------------
def test_the_longest_suffix_match_wins_then_the_most_recent():
    # suffix [1, 2] occurs at 0..1 (followed by 3, 4) and, longer, [9, 1, 2] at 5..7 (followed by 7)
    assert match_ngram_draft([1, 2, 3, 4, 9, 1, 2, 7, 8, 9, 1, 2], 3, 1, 4) == [7, 8, 9]
    # two equally long matches: the most recent one
    assert match_ngram_draft([5, 1, 6, 5, 1, 7, 5, 1], 2, 1, 4) == [7, 5]
    assert match_ngram_draft([1, 2, 3], 4, 1, 4) == []  # the last token never occurred before
    assert match_ngram_draft([1, 2, 1, 3, 1], 2, 2, 4) == []  # only 1-token matches: below the minimum
    # a match that overlaps the suffix continues its period: [1, 2] repeats, so the draft is more of it
    assert match_ngram_draft([7, 7, 7], 5, 1, 4) == [7, 7, 7, 7, 7]
    assert match_ngram_draft([9, 1, 2, 1, 2, 1, 2], 5, 1, 12) == [1, 2, 1, 2, 1]


# ---- the verifier ---------------------------------------------------------------------------------
def test_accepted_drafts_are_the_longest_run_equal_to_their_rows_tokens():
    # three requests' rows in turn: [last token, 3 drafts], [last token], [last token, 2 drafts]
    drafts = [[5, 6, 7], [], [9, 4]]
    rows = [5, 6, 8, 1] + [2] + [3, 4]  # request 0: drafts 5, 6 right, 7 wrong; request 2: its first wrong
    assert accept_lengths(drafts, rows) == [2, 0, 0]
    assert accept_lengths([[5, 6]], [5, 6, 2]) == [2]  # all accepted: the third row is the bonus token
    result = GenerationBatchResult(next_token_ids=rows, logprobs=[0.0] * 7, forward_time=0.0,
                                   draft_lens=[3, 0, 2], accept_lens=[2, 0, 0])
    # the rows whose tokens each request takes: its accepted drafts' and the bonus token's
    assert [result.rows_of(i) for i in range(3)] == [range(0, 3), range(4, 5), range(5, 6)]
    plain = GenerationBatchResult(next_token_ids=[1, 2], logprobs=[0.0, 0.0], forward_time=0.0)
    assert [plain.rows_of(i) for i in range(2)] == [range(0, 1), range(1, 2)]


# ---- same tokens ----------------------------------------------------------------------------------
def test_same_tokens_and_drafts_are_accepted(base_engine, plain, tmp_path):
    engine = base_engine.fork(trace_dir=str(tmp_path), **SPEC)
    runner = engine.model_runner
    if onednn_packing_available():  # float32: verify forwards run on the weights packed for K + 1 rows
        assert runner.verify_model is not None and runner.verify_model is not runner.model
        assert runner.verify_model.lm_head_weight() is runner.model.lm_head_weight()  # the same weights
    try:
        assert outputs(engine, PROMPTS, PARAMS, rids=["copy", "days", "haiku", "primes"]) == plain
        stats = engine.scheduler.model_worker.stats
        assert_no_leak(engine)
        engine.scheduler.self_check_during_idle()
    finally:
        engine.shutdown()
    assert stats.accepted > 0 and stats.proposed >= stats.accepted

    trace = load_trace(tmp_path)
    assert check_trace(trace) == []
    assert main(["trace", "check", str(tmp_path)]) == 0
    verified = [ev for ev in trace.events if ev.name == "sched.spec_verified"]
    accepted = {rid: 0 for rid in trace.rids()}
    for ev in verified:
        for rid, d, rows, a, n in zip(ev.rids, ev.get("draft_lens"), ev.get("verified_rows"),
                                      ev.get("accepted_lens"), ev.get("appended_lens")):
            assert rows == d + 1 and 0 <= a <= d and 1 <= n <= a + 1
            accepted[rid] += a
    assert accepted["copy"] > 0 and accepted["days"] > 0  # the copied sentence and the repeated days
    assert_adaptive_drafts(verified, k=SPEC["speculative_num_draft_tokens"])
    # rejected drafts' slots went straight back to the pool
    assert any(ev.get("reason") == "rejected" for ev in trace.events if ev.name == "kv.free")
    # replay shows the draft rows of a verify round, each with the token its logits gave
    verify = [s.batch for s in replay(trace) if s.batch is not None and s.batch.mode == "TARGET_VERIFY"]
    assert verify and all(row.sampled and row.token is not None for b in verify for row in b.forward_rows)
    assert any(row.draft for b in verify for row in b.rows)
    assert not any(row.cached for b in verify for row in b.rows)
    # the round view and `trace show` say which rows are drafts
    state = next(s for s in replay(trace) if s.batch is not None and s.batch.mode == "TARGET_VERIFY")
    assert "new (draft)" in {cells[6] for cells in table_rows(state, {})}
    console = Console(file=io.StringIO(), width=120, record=True, color_system=None)
    show(trace, console)
    text = console.export_text()
    assert "TARGET_VERIFY" in text and " drafts " in text


def assert_adaptive_drafts(verified, k: int) -> None:
    """The default draft limit: 1 at first, doubled (up to K) after a round whose drafts were all accepted,
    the number accepted (at least 1) after a rejection. A request may draft fewer (no match, or its
    max_new_tokens near), never more."""
    limit, lens = {}, {}
    for ev in verified:
        for rid, d, a in zip(ev.rids, ev.get("draft_lens"), ev.get("accepted_lens")):
            if not d:
                continue
            assert d <= limit.setdefault(rid, 1), (rid, d, limit[rid])
            limit[rid] = min(k, 2 * limit[rid]) if a == d else max(1, a)
            lens.setdefault(rid, []).append(d)
    assert lens["days"][:4] == [1, 2, 4, 4]  # the repeated days: every draft right, so it climbs to K
    assert max(lens["copy"]) == k


@pytest.mark.parametrize("flags", [dict(disable_radix_cache=True, speculative_num_draft_tokens=1,
                                        speculative_ngram_min_match_window_size=2),
                                   dict(enable_mixed_chunk=True, chunked_prefill_size=16)])
def test_same_tokens_under_other_schedules(base_engine, plain, flags):
    engine = base_engine.fork(**{**SPEC, **flags})
    assert outputs(engine, PROMPTS, PARAMS) == plain
    assert_no_leak(engine)


def test_a_second_request_shares_the_cached_prefix(base_engine, plain):
    engine = base_engine.fork(**SPEC)
    first, second = engine.generate(COPY, PARAMS), engine.generate(COPY, PARAMS)
    assert second["usage"]["cached_tokens"] > 0
    assert (first["output_ids"], first["finish_reason"]) == (second["output_ids"], second["finish_reason"]) == plain[0]
    assert_no_leak(engine)


FINISHING = [
    {"max_new_tokens": 7, "temperature": 0, "ignore_eos": True},  # the limit falls inside accepted drafts
    {"max_new_tokens": 40, "temperature": 0, "stop": "Thursday"},  # a stop string inside accepted drafts
    {"max_new_tokens": 40, "temperature": 0, "stop_token_ids": [15083]},
]


def test_finishing_inside_the_drafts_drops_the_rest(base_engine):
    """Each way to finish, on the two repetitive prompts, all six requests in one run."""
    prompts, params = [DAYS, COPY] * len(FINISHING), [p for p in FINISHING for _ in (DAYS, COPY)]
    plain_engine, spec_engine = base_engine.fork(), base_engine.fork(**SPEC)
    want = outputs(plain_engine, prompts, params)
    assert [reason["type"] for _, reason in want] == ["length", "length", "stop", "stop", "stop", "stop"]
    assert outputs(spec_engine, prompts, params) == want
    assert spec_engine.scheduler.model_worker.stats.accepted > 0
    assert_no_leak(spec_engine)


def test_sampled_requests_decode_without_drafts(base_engine, tmp_path):
    engine = base_engine.fork(trace_dir=str(tmp_path), **SPEC)
    try:
        engine.generate([DAYS, DAYS], [PARAMS, {"max_new_tokens": 16, "temperature": 0.8, "seed": 3}],
                        rid=["greedy", "sampled"])
        assert_no_leak(engine)
    finally:
        engine.shutdown()
    trace = load_trace(tmp_path)
    assert check_trace(trace) == []
    drafts = {rid: 0 for rid in ("greedy", "sampled")}
    for ev in trace.events:
        if ev.name == "sched.spec_verified":
            for rid, d in zip(ev.rids, ev.get("draft_lens")):
                drafts[rid] += d
    assert drafts["greedy"] > 0 and drafts["sampled"] == 0


RETRACT_PROMPTS = ["The history of the Roman empire", DAYS, "Dear diary, today I", "One, two, three, four, one, two,"]
RETRACT_PARAMS = {"max_new_tokens": 28, "temperature": 0, "ignore_eos": True}


def test_retraction_keeps_the_tokens(base_engine):
    want = outputs(base_engine.fork(), RETRACT_PROMPTS, RETRACT_PARAMS)
    # about 50 prompt tokens and 4 x 28 new ones: 100 slots admit all four, then run out while decoding (with
    # K drafts every round: the adaptive default takes fewer draft slots and gets through without retracting)
    for flags in (dict(max_total_tokens=100), dict(max_total_tokens=100, disable_radix_cache=True)):
        flags["disable_adaptive_draft"] = True
        tight = base_engine.fork(**{**SPEC, **flags})
        assert outputs(tight, RETRACT_PROMPTS, RETRACT_PARAMS) == want
        assert tight.scheduler.num_retracted > 0, "the pool must be small enough to force a retraction"
        assert tight.scheduler.model_worker.stats.accepted > 0
        assert_no_leak(tight)


def test_replay_equals_the_live_scheduler_every_round(base_engine, tmp_path):
    """Replay, rebuilt from the trace alone, holds the live scheduler's queues, free slots and tree after
    every round, verify rounds (and their freed draft slots) included, and through a retraction."""
    ids = [10, 11, 12, 13, 14, 10, 11, 12, 13, 14, 10, 11]
    params = {"max_new_tokens": 16, "ignore_eos": True, "temperature": 0.0}
    engine = base_engine.fork(trace_dir=str(tmp_path), max_total_tokens=32, chunked_prefill_size=8,
                              **SPEC, speculative_ngram_min_match_window_size=1)
    try:
        live = drive(engine, [Arrival(0, [("a", ids, params), ("b", ids[:7] + [20, 21], params)]),
                              Arrival(3, [("c", ids[2:], params)])])
    finally:
        engine.shutdown()
    trace = load_trace(tmp_path)
    assert check_trace(trace) == []
    assert any(ev.name == "sched.spec_verified" for ev in trace.events)
    assert any(ev.name == "sched.retracted" for ev in trace.events)
    assert_replay_is_live(trace, live)


def test_streaming_sends_every_accepted_token(base_engine):
    """A verify round may pass a multiple of --stream-interval without landing on it: the tokens still go out."""
    params = {"max_new_tokens": 24, "temperature": 0, "ignore_eos": True}
    want = base_engine.fork().generate(DAYS, params)["output_ids"]
    engine = base_engine.fork(stream_interval=3, **SPEC)
    deltas = [d["output_ids"] for d in engine.generate(DAYS, params, stream=True)]
    assert [t for d in deltas for t in d] == want
    assert len([d for d in deltas if d]) > 2  # streamed as it went, not all at the end
    assert engine.scheduler.model_worker.stats.accepted > 0
    assert_no_leak(engine)
