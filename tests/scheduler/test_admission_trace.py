"""The admission arithmetic in real engine traces: every budget that refuses, with the numbers worked out
by hand from the prompt lengths, and the decisions the scheduler used to take silently."""

from __future__ import annotations

import pytest

from minisgl.server.protocol import GenerateReqInput
from tracer.check import check_trace
from tracer.reader import load_trace

PARAMS = {"ignore_eos": True, "temperature": 0.0}


def budgets(total, rows, chunk, kv, running) -> dict:
    return {"rem_total_tokens": pytest.approx(total), "rem_input_tokens": rows, "rem_chunk_tokens": chunk,
            "rem_kv_room": kv, "rem_running": running}


def run(base_engine, tmp_path, waves: list[list[tuple[str, list[int], int]]], **flags):
    """Submit each wave of (rid, input_ids, max_new_tokens) just before the next round, run to the end, and
    return the trace (which must pass every check)."""
    engine = base_engine.fork(trace_dir=str(tmp_path), trace_level=2, schedule_policy="fcfs", **flags)
    try:
        for wave in waves:
            for rid, ids, n in wave:
                params = {**PARAMS, "max_new_tokens": n}
                engine.submit(GenerateReqInput(rid=rid, input_ids=ids, sampling_params=params))
            engine.step()
        while engine.tokenizer_manager.rid_to_state:  # a request leaves it when it finishes
            engine.step()
    finally:
        engine.shutdown()
    trace = load_trace(tmp_path)
    assert check_trace(trace) == []
    return trace


def one(trace, name: str, round: int, **match) -> dict:
    """The attrs of the one event with this name in this round whose rid or attrs match."""
    found = [ev for ev in trace.events_in_round(round) if ev.name == name
             and all((ev.rid if k == "rid" else ev.get(k)) == v for k, v in match.items())]
    assert len(found) == 1, (name, round, match, found)
    return found[0].attrs


def test_rows_refusal_and_the_logit_rows_of_a_two_request_extend(base_engine, tmp_path):
    # R1 3 + R2 4 rows leave 1 of max_prefill_tokens 8: R3's 5 rows are refused, R4 is never looked at
    trace = run(base_engine, tmp_path, [[("R1", [10, 11, 12], 2), ("R2", [20, 21, 22, 23], 2),
                                         ("R3", [30, 31, 32, 33, 34], 2), ("R4", [40, 41], 1)]],
                max_total_tokens=64, max_prefill_tokens=8, chunked_prefill_size=64, max_running_requests=4)
    start = one(trace, "sched.prefill_budget", 1)
    assert start["budgets"] == budgets(64, 8, 64, 64, 4)
    assert (start["available_size"], start["evictable_size"], start["reserved_tokens"]) == (64, 0, 0)
    r1 = one(trace, "sched.admission", 1, rid="R1")
    assert r1["decision"] == "admitted" and r1["extend_range"] == [0, 3] and r1["future_tokens"] == 2
    assert r1["before"] == start["budgets"]
    assert r1["after"] == budgets(64 - 3 - 2, 8 - 3, 64 - 3, 64 - 3, 3)
    r2 = one(trace, "sched.admission", 1, rid="R2")
    assert r2["before"] == r1["after"] and r2["after"] == budgets(59 - 4 - 2, 5 - 4, 61 - 4, 61 - 4, 2)
    r3 = one(trace, "sched.admission", 1, rid="R3")
    assert (r3["decision"], r3["budget"], r3["extend_input_len"]) == ("refused", "max_prefill_tokens", 5)
    assert r3["before"] == r3["after"] == budgets(53, 1, 57, 57, 2)
    assert one(trace, "sched.admission_stopped", 1) == {"not_considered": ["R4"], "stopped_by": "R3",
                                                        "decision": "refused", "budget": "max_prefill_tokens"}
    batch = one(trace, "sched.batch_formed", 1)
    assert batch["extend_lens"] == [3, 4] and batch["logit_rows"] == [2, 6]  # each prompt's last row
    assert "max_new_tokens_clamped" not in one(trace, "sched.req_created", 1, rid="R1")
    # round 2 reserves what R1 and R2 may still produce: 1 token each at new_token_ratio 0.7
    start2 = one(trace, "sched.prefill_budget", 2)
    assert (start2["available_size"], start2["running_rids"], start2["running_future_tokens"]) == (57, ["R1", "R2"],
                                                                                                   [1, 1])
    assert start2["new_token_ratio"] == 0.7 and start2["reserved_tokens"] == pytest.approx(1.4)
    assert start2["budgets"] == budgets(57 - 1.4, 8, 64, 57, 2)
    # R4 (max_new_tokens 1) finished in its prefill round: the next merge drops it
    assert one(trace, "sched.batch_merged", 3) == {"joined": ["R3"], "finished": ["R4"], "chunked_excluded": None,
                                                   "running": ["R1", "R2", "R3"]}


def test_chunk_refusal_and_the_budget_that_cuts_a_chunk(base_engine, tmp_path):
    # R1's 4 rows spend chunked_prefill_size 4: R2 is refused, R3 never looked at
    trace = run(base_engine, tmp_path, [[("R1", [10, 11, 12, 13], 2), ("R2", [20, 21, 22], 2),
                                         ("R3", [30, 31, 32, 33, 34, 35], 2)]],
                max_total_tokens=64, max_prefill_tokens=64, chunked_prefill_size=4, max_running_requests=4)
    r1 = one(trace, "sched.admission", 1, rid="R1")
    assert r1["before"] == budgets(64, 64, 4, 64, 4) and r1["after"] == budgets(58, 60, 0, 60, 3)
    r2 = one(trace, "sched.admission", 1, rid="R2")
    assert (r2["decision"], r2["budget"]) == ("refused", "chunked_prefill_size")
    assert r2["before"] == r2["after"] == budgets(58, 60, 0, 60, 3)
    assert one(trace, "sched.admission_stopped", 1)["not_considered"] == ["R3"]
    # round 2: R1 reserves 1 × 0.7; R2 takes 3 of the 4 chunk rows, so R3 gets a 1-row chunk
    assert one(trace, "sched.prefill_budget", 2)["budgets"] == budgets(60 - 0.7, 64, 4, 60, 3)
    r2 = one(trace, "sched.admission", 2, rid="R2")
    assert r2["after"] == budgets(59.3 - 3 - 2, 61, 1, 57, 2)
    r3 = one(trace, "sched.admission", 2, rid="R3")
    assert (r3["decision"], r3["budget"], r3["extend_range"]) == ("chunked", "chunked_prefill_size", [0, 1])
    assert r3["after"] == budgets(54.3 - 1, 60, 0, 56, 1)  # a chunk reserves no future tokens
    assert one(trace, "sched.batch_merged", 3) == {"joined": ["R2"], "finished": [], "chunked_excluded": "R3",
                                                   "running": ["R1", "R2"]}


def test_kv_room_refusal_counts_the_running_requests_reservation(base_engine, tmp_path):
    # R1 (4 tokens, 3 still to produce) runs; in round 2 R2 needs 17 + 1 = 18, but only 24 - 4 - 3 × 0.7 fit
    trace = run(base_engine, tmp_path, [[("R1", [10, 11, 12, 13], 4)], [("R2", list(range(20, 37)), 1)]],
                max_total_tokens=24, max_running_requests=4)
    start = one(trace, "sched.prefill_budget", 2)
    assert (start["available_size"], start["evictable_size"], start["new_token_ratio"]) == (20, 0, 0.7)
    assert (start["running_rids"], start["running_future_tokens"]) == (["R1"], [3])
    assert start["reserved_tokens"] == pytest.approx(2.1)
    assert start["budgets"] == budgets(20 - 2.1, 4096, 512, 20, 3)
    r2 = one(trace, "sched.admission", 2, rid="R2")
    assert (r2["decision"], r2["budget"], r2["need"]) == ("refused", "kv_cache", 18)
    assert r2["before"] == r2["after"] == start["budgets"]
    assert one(trace, "sched.decode_mem_checked", 2) == {"where": "decode", "running": ["R1"], "finished": [],
                                                         "needed": 1, "available_size": 20, "evictable_size": 0,
                                                         "ok": True}


def test_running_refusal_then_prefill_skipped(base_engine, tmp_path):
    trace = run(base_engine, tmp_path, [[("R1", [10, 11, 12], 2), ("R2", [20, 21, 22], 1), ("R3", [30, 31], 1)]],
                max_total_tokens=64, max_running_requests=1)
    r1 = one(trace, "sched.admission", 1, rid="R1")
    assert r1["after"] == budgets(59, 4093, 509, 61, 0)
    r2 = one(trace, "sched.admission", 1, rid="R2")
    assert (r2["decision"], r2["budget"]) == ("refused", "max_running_requests")
    assert r2["before"] == r2["after"] == r1["after"]
    assert one(trace, "sched.admission_stopped", 1)["not_considered"] == ["R3"]
    assert one(trace, "sched.batch_merged", 2) == {"joined": ["R1"], "finished": [], "chunked_excluded": None,
                                                   "running": ["R1"]}
    assert one(trace, "sched.prefill_skipped", 2) == {"reason": "max_running_requests", "num_running": 1,
                                                      "max_running_requests": 1, "waiting": ["R2", "R3"]}
    assert not [ev for ev in trace.events_in_round(2) if ev.name == "sched.prefill_budget"]


def test_mixed_round_checks_decode_memory_and_samples_every_request_last_row(base_engine, tmp_path):
    trace = run(base_engine, tmp_path, [[("R1", [10, 11, 12], 3)], [("R2", [20, 21, 22, 23], 2)]],
                max_total_tokens=64, enable_mixed_chunk=True)
    start = one(trace, "sched.prefill_budget", 2)
    assert start["mixed_decode_rows"] == 1 and start["budgets"]["rem_input_tokens"] == 4096 - 1
    assert one(trace, "sched.decode_mem_checked", 2) == {"where": "mixed", "running": ["R1"], "finished": [],
                                                         "needed": 1, "available_size": 64 - 3 - 4,
                                                         "evictable_size": 0, "ok": True}
    batch = one(trace, "sched.batch_formed", 2)
    assert (batch["forward_mode"], batch["extend_lens"], batch["logit_rows"]) == ("MIXED", [4, 1], [3, 4])


def test_clamped_max_new_tokens_is_on_req_created(base_engine, tmp_path):
    # 16 KV slots: a 14-token prompt leaves room for 2 output tokens
    trace = run(base_engine, tmp_path, [[("R1", list(range(10, 24)), 20)]], max_total_tokens=16)
    r1 = one(trace, "sched.req_created", 1, rid="R1")
    assert r1["max_new_tokens_clamped"] == {"from": 20, "to": 16 - 14}
    assert r1["sampling_params"]["max_new_tokens"] == 2


@pytest.mark.parametrize("disable_radix_cache", [True, False])
def test_retraction_frees_kv_with_an_honest_reason(base_engine, tmp_path, disable_radix_cache):
    # R1 and R2 reserve all 6 of their tokens, R3 (round 2) only 0.7 of theirs: 3 × (2 + 5) slots > 20, so when
    # each has 5 tokens and 18 slots are taken, the decode check fails and R1 (the rid tie-break) is retracted
    trace = run(base_engine, tmp_path, [[("R1", [10, 11], 6), ("R2", [20, 21], 6)], [("R3", [30, 31], 6)]],
                max_total_tokens=20, disable_radix_cache=disable_radix_cache)
    assert one(trace, "sched.decode_mem_checked", 7) == {"where": "decode", "running": ["R1", "R2", "R3"],
                                                         "finished": [], "needed": 3, "available_size": 2,
                                                         "evictable_size": 0, "ok": False}
    one(trace, "sched.retracted", 7, rid="R1")
    held = [s for ev in trace.by_rid("R1") if ev.name == "kv.assigned" and ev.round < 7 for s in ev.get("slots")]
    assert len(held) == 2 + 4  # its prompt, and the inputs of its 4 decode rounds
    retraction = trace.events_in_round(7)
    retraction = retraction[: [ev.name for ev in retraction].index("sched.retracted")]
    frees = [(ev.get("reason"), sorted(ev.get("slots"))) for ev in retraction if ev.name == "kv.free"]
    if disable_radix_cache:  # no tree to keep them: the retraction frees them
        assert frees == [("retracted", sorted(held))]
    else:  # the tree keeps them (evictable), so a resume may reuse them: nothing is freed
        assert frees == []
        # its prompt entered the tree after its prefill; now its decode slots follow
        assert sorted(one(trace, "cache.inserted", 7, rid="R1")["slots"]) == sorted(held[2:])
