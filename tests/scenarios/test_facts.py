"""The numbers the lessons quote, pinned scenario by scenario on the real engine: rows, positions, slots,
rounds, victims, budgets. If the engine changes one of them, the lesson that quotes it must change too."""

from __future__ import annotations

import pytest

from minisgl.scenarios.look import batch_of, batches, events, first

pytestmark = pytest.mark.slow


def rows_of(ev) -> int:
    return len(ev.get("out_cache_loc"))


def forward_of(trace, round_: int):
    return first(trace, "model.forward", lambda ev: ev.round == round_ and ev.ph == "B")


def test_shared_prefix_nine_rows_on_a_fresh_engine(scenario_runs):
    """R0 (" red green blue") took slots 1-3 and left them in the tree; R1 and R2 then run as one EXTEND."""
    trace = scenario_runs("shared_prefix").trace
    r0 = batch_of(trace, "R0")
    assert (r0.round, r0.get("out_cache_loc")) == (1, [1, 2, 3])
    extend = batch_of(trace, "R2", "EXTEND")
    assert extend.round == 2 and extend.rids == ["R1", "R2"]
    assert extend.get("seq_lens") == [6, 6] and extend.get("prefix_lens") == [0, 3]
    assert extend.get("extend_lens") == [6, 3]
    assert extend.get("out_cache_loc") == [4, 5, 6, 7, 8, 9, 10, 11, 12]
    fwd = forward_of(trace, 2)
    assert fwd.get("positions") == [0, 1, 2, 3, 4, 5, 3, 4, 5]
    assert fwd.get("num_rows") == 9
    # R2's first three positions read R0's slots from the tree; only the last row of each request is sampled
    assert first(trace, "sched.prefix_matched", lambda ev: ev.rid == "R2").get("matched_slots") == [1, 2, 3]
    assert len(first(trace, "sched.sampled", lambda ev: ev.round == 2).get("token_ids")) == 2
    decode = batch_of(trace, "R2", "DECODE")
    assert decode.round == 3 and decode.get("out_cache_loc") == [13, 14]
    assert forward_of(trace, 3).get("positions") == [6, 6]


def test_radix_cache_hit_then_eviction(scenario_runs):
    ran = scenario_runs("radix_cache")
    hit = first(ran.trace, "sched.prefix_matched", lambda ev: ev.rid == "B")
    assert (hit.get("prefix_len"), hit.get("matched_slots")) == (3, [1, 2, 3])
    assert ran.outcome.results["B"]["usage"]["cached_tokens"] == 3
    assert batch_of(ran.trace, "B", "EXTEND").get("extend_lens") == [1]
    evicted = events(ran.trace, "cache.evicted")
    assert evicted and evicted[0].round == batch_of(ran.trace, "C", "EXTEND").round


def test_admission_budgets_refuse_in_turn(scenario_runs):
    trace = scenario_runs("admission_budgets").trace
    first_refusals = {}
    for ev in events(trace, "sched.admission", lambda ev: ev.get("decision") == "refused"):
        first_refusals.setdefault(ev.get("budget"), (ev.round, ev.rid))
    assert first_refusals == {
        "max_prefill_tokens": (1, "B"),
        "chunked_prefill_size": (2, "C"),
        "max_running_requests": (3, "D"),
        "kv_cache": (10, "E"),
    }


def test_lpm_puts_the_longest_cached_prefix_first(scenario_runs):
    trace = scenario_runs("lpm_order").trace
    assert [ev.get("waiting") for ev in events(trace, "sched.queue_sorted")][:2] == [["P"], ["Y", "X"]]
    admitted = [
        ev.rid for ev in events(trace, "sched.admission", lambda ev: ev.get("decision") == "admitted")
    ]
    assert admitted == ["P", "Y", "X"]
    assert first(trace, "sched.prefix_matched", lambda ev: ev.rid == "Y").get("prefix_len") == 6


def test_chunked_prefill_ranges_and_no_token_from_a_chunk(scenario_runs):
    trace = scenario_runs("chunked_prefill").trace
    steps = [
        (ev.round, ev.get("decision"), ev.get("extend_range"))
        for ev in events(trace, "sched.admission", lambda ev: ev.rid == "L")
    ]
    assert steps == [(1, "chunked", [0, 16]), (2, "chunked", [16, 32]), (3, "admitted", [32, 41])]
    appended = [ev.round for ev in events(trace, "sched.output_appended", lambda ev: ev.rid == "L")]
    assert appended == [3, 4, 5]
    assert [ev.get("chunked") for ev in events(trace, "sched.round_end")][:3] == ["L", "L", None]


def test_retraction_victim_and_resume(scenario_runs, base_engine):
    ran = scenario_runs("retract")
    (victim,) = events(ran.trace, "sched.retracted")
    assert (victim.rid, victim.round, victim.get("output_len")) == ("A", 21, 19)
    back = first(ran.trace, "sched.admission", lambda ev: ev.rid == "A" and ev.round > 21)
    assert (back.round, back.get("extend_range")) == (22, [4, 23])
    # A resumes with the same tokens it gives alone, in a pool big enough for it
    alone = base_engine.fork(max_total_tokens=64).generate(
        " one two three four", {"max_new_tokens": 20, "temperature": 0, "ignore_eos": True}
    )
    assert ran.outcome.results["A"]["output_ids"] == alone["output_ids"]


def test_mixed_rounds_carry_the_running_decode_rows(scenario_runs):
    trace = scenario_runs("mixed_round").trace
    mixed = [ev for ev in batches(trace) if ev.get("forward_mode") == "MIXED"]
    assert [(ev.round, ev.rids, ev.get("extend_lens"), ev.get("decoding_rids")) for ev in mixed] == [
        (3, ["B", "A"], [4, 1], ["A"]),
        (4, ["B", "A"], [2, 1], ["A"]),
    ]


def test_stream_interval_hold_back_and_stop_trimming(scenario_runs):
    ran = scenario_runs("stream_detok")
    sends = events(
        ran.trace, "ipc.send", lambda ev: ev.get("msg") == "BatchTokenIDOutput" and "ZH" in ev.rids
    )
    assert [len(ev.get("output_ids")[ev.rids.index("ZH")]) for ev in sends] == [
        1,
        2,
        3,
        2,
    ]  # tokens 1, 3, 6, 8
    assert events(ran.trace, "detok.decoded", lambda ev: ev.rid == "ZH" and ev.get("held_back_tokens"))
    assert ran.outcome.results["ZH"]["text"] == "首都。\n\n"
    stop = ran.outcome.results["STOP"]
    assert stop["finish_reason"]["type"] == "stop" and stop["text"] == "1. 1\n2. 2\n\n"


def test_aborts_while_waiting_and_while_running(scenario_runs):
    ran = scenario_runs("abort")
    asked = {ev.rid: (ev.round, ev.get("where")) for ev in events(ran.trace, "sched.abort_requested")}
    assert asked == {"WAIT": (3, "waiting"), "RUN": (4, "running")}
    finished = {
        ev.rid: (ev.round, ev.get("output_len"))
        for ev in events(ran.trace, "sched.finished")
        if ev.get("finish_reason")["type"] == "abort"
    }
    assert finished == {"WAIT": (3, 0), "RUN": (4, 4)}
    assert ran.outcome.results["LATER"]["finish_reason"]["type"] == "length"


def test_context_limit_refuses_and_clamps(scenario_runs):
    ran = scenario_runs("context_limit")
    assert ran.outcome.results["TOO_LONG"]["error"] == (
        "the prompt has 40 tokens, but at most 31 fit: the limit is 32 tokens (context length 32, "
        "KV cache 64 "
        "slots) and one output token needs room"
    )
    clamped = ran.outcome.results["CLAMPED"]
    assert len(clamped["output_ids"]) == 22 and "clamped to 22" in clamped["warning"]


def test_one_request_end_to_end(scenario_runs):
    ran = scenario_runs("one_request")
    trace = ran.trace
    assert {p.proc for p in trace.processes()} == {"tokenizer_manager", "scheduler", "detokenizer"}
    prefill = batch_of(trace, "R1", "EXTEND")
    assert prefill.round == 1 and rows_of(prefill) == 37
    assert ran.outcome.results["R1"]["text"] == "The capital of China is Beijing."
    names = [ev.name for ev in trace.by_rid("R1")]
    assert names[0] == "http.request_received" and names[-1] == "http.response_finished"


def test_client_disconnect_aborts_and_frees(scenario_runs):
    """When the abort lands depends on the clock (how soon the server sees the closed socket): the facts
    pinned here are the ones that do not."""
    trace = scenario_runs("client_disconnect").trace
    assert first(trace, "http.error", lambda ev: ev.rid == "LEAVER").get("status") == 499
    assert first(trace, "sched.abort_requested", lambda ev: ev.rid == "LEAVER").get("where") == "running"
    done = first(trace, "sched.finished", lambda ev: ev.rid == "LEAVER")
    assert done.get("finish_reason")["type"] == "abort" and done.get("output_len") < 200
    last = events(trace, "sched.round_end")[-1]
    assert last.get("running") == [] and last.get("free_slots") + last.get("cached_slots") == 512


def test_data_parallel_round_robin_and_each_rank_s_own_rounds(scenario_runs):
    """R1..R4 reach the controller in order: ranks 0, 1, 0, 1; R5 and R6 go where their client said (R6's
    header over its body). Each rank runs its three requests one after the other, counting its own rounds;
    every later one finds the chat template's prefix in that rank's own tree, and R5, sent to R2's rank,
    also R2's "Name a"."""
    from tracer.dp_ranks import dp_scheduler_procs, rank_view

    ran = scenario_runs("data_parallel")
    trace = ran.trace
    dispatches = events(trace, "dp.dispatch")
    assert [(ev.rid, ev.get("dp_rank"), ev.get("method"), ev.get("routed")) for ev in dispatches] == [
        ("R1", 0, "round_robin", False), ("R2", 1, "round_robin", False),
        ("R3", 0, "round_robin", False), ("R4", 1, "round_robin", False),
        ("R5", 1, "round_robin", True), ("R6", 0, "round_robin", True)]
    assert [ev.get("loads") for ev in dispatches] == [[0, 0], [1, 0], [0, 0], [1, 0], [0, 0], [0, 1]]
    assert dp_scheduler_procs(trace) == ["scheduler_dp0", "scheduler_dp1"]
    for proc, rids in zip(dp_scheduler_procs(trace), (("R1", "R3", "R6"), ("R2", "R4", "R5"))):
        view = rank_view(trace, proc)
        formed = [(ev.round, ev.get("forward_mode"), tuple(ev.rids)) for ev in batches(view)]
        assert formed == [(4 * i + r, "EXTEND" if r == 1 else "DECODE", (rid,))
                          for i, rid in enumerate(rids) for r in (1, 2, 3, 4)]
        cached = {ev.rid: ev.get("cached_tokens") for ev in events(view, "sched.finished")}
        assert cached[rids[0]] == 0 and cached[rids[1]] > 0 and cached[rids[2]] > 0
    cached = {ev.rid: ev.get("cached_tokens") for ev in events(trace, "sched.finished")}
    assert cached["R5"] > cached["R4"] == cached["R6"]  # R5 found more: "Name a" after the template
    assert all(len(ran.outcome.results[rid]["text"]) > 0 for rid in ("R1", "R2", "R3", "R4", "R5", "R6"))


def test_pd_disaggregation_prefill_on_one_server_decode_on_the_other(scenario_runs, base_engine):
    """R1, R2 and R3 (streamed), one after the other, behind the router: the prefill server runs one EXTEND
    each and sends the whole prompt's KV rows (46080 bytes a row: K and V, 30 layers, 3 KV heads of 64
    float32) and the first token; the decode server runs only DECODE rounds. R2's and R3's prefixes are in
    the prefill server's tree, yet all their rows travel. The answers are the offline Engine's greedy
    text."""
    from minisgl.scenarios.pd_disaggregation import ASKS, STREAMED
    from tracer.servers import server_names, server_view

    ran = scenario_runs("pd_disaggregation")
    trace = ran.trace
    assert server_names(trace) == ["decode", "prefill"]
    prefill, decode = server_view(trace, "prefill"), server_view(trace, "decode")
    assert [(ev.round, ev.get("forward_mode"), tuple(ev.rids), ev.get("extend_lens")) for ev in batches(prefill)] == [
        (1, "EXTEND", ("R1",), [5]), (2, "EXTEND", ("R2",), [3]), (3, "EXTEND", ("R3",), [2])]
    assert [(ev.round, ev.get("forward_mode"), tuple(ev.rids)) for ev in batches(decode)] == [
        (r, "DECODE", (rid,)) for rid, rounds in (("R1", (1, 2)), ("R2", (3, 4)), ("R3", (5, 6))) for r in rounds]
    sent = {ev.rid: ev for ev in events(prefill, "disagg.kv_sent")}
    received = {ev.rid: ev for ev in events(decode, "disagg.kv_received")}
    assert {rid: (ev.get("num_tokens"), ev.get("nbytes")) for rid, ev in sent.items()} == {
        "R1": (5, 5 * 46080), "R2": (8, 8 * 46080), "R3": (5, 5 * 46080)}
    for rid, ev in sent.items():  # the same room, rows and first token on both sides
        got = received[rid]
        assert (got.get("room"), got.get("num_tokens"), got.get("nbytes"), got.get("first_token")) == (
            ev.get("room"), ev.get("num_tokens"), ev.get("nbytes"), ev.get("first_token"))
    assert len({ev.get("room") for ev in sent.values()}) == 3
    # the decode side preallocated the whole prompt; the prefill side finished each request one round later,
    # once the decode side had acknowledged, with its one token; R2 found R1's prompt in the tree, R3 its
    # first three tokens ("The capital of")
    prealloc = {ev.rid: ev.get("num_slots") for ev in events(decode, "disagg.bootstrap")}
    assert prealloc == {"R1": 5, "R2": 8, "R3": 5}
    done = {ev.rid: (ev.round, ev.get("output_len"), ev.get("cached_tokens")) for ev in events(prefill, "sched.finished")}
    assert done == {"R1": (2, 1, 0), "R2": (3, 1, 5), "R3": (4, 1, 3)}
    assert [ev.get("output_len") for ev in events(decode, "sched.finished")] == [3, 3, 3]
    for rid, text, max_new_tokens in (*ASKS, STREAMED):
        reference = base_engine.generate(text, {"max_new_tokens": max_new_tokens, "temperature": 0})
        assert ran.outcome.results[rid]["text"] == reference["text"]
        assert sent[rid].get("first_token") == reference["output_ids"][0]
    assert ran.outcome.results["R3"]["sse_messages"] == 3  # one message a token, through the router


def test_tensor_parallel_every_rank_runs_every_forward(scenario_runs):
    """Three ranks, the same four forwards on each; every forward makes 2 all-reduces per decoder layer plus
    the embedding's, and one all-gather of the logits, whatever its number of rows."""
    from minisgl.model_loader.loader import load_model_config, resolve_model
    from tracer.check import check_trace

    ran = scenario_runs("tensor_parallel")
    trace = ran.trace
    assert check_trace(trace) == []  # holds every rank to rank 0 (tracer/tp_ranks.py)
    layers = load_model_config(resolve_model(None)).num_hidden_layers
    ends = events(trace, "model.forward", lambda ev: ev.ph == "E")
    assert [(ev.round, ev.get("tp_size"), ev.get("all_reduce"), ev.get("all_gather")) for ev in ends] == [
        (r, 3, 2 * layers + 1, 1) for r in (1, 2, 3, 4)]
    for proc, evs in trace.tp_rank_events.items():
        rounds = [ev.round for ev in evs if ev.name == "model.forward" and ev.ph == "B"]
        assert rounds == [1, 2, 3, 4], proc
    assert ran.outcome.results["R1"]["text"] == "The capital of China"


def test_overlap_placeholders_resolve_a_round_later_and_finishes_leave_an_extra_row(scenario_runs):
    """Lesson overlap: round 2 is formed while round 1 runs, so A and B decode from placeholders -1 and -2,
    which the forward reads as round 1's sampled tokens; round 4 needs one for C only; A and C finish in
    round 5 on round 4's tokens, and their rows of round 5 (slots 14 and 16) are freed in round 6."""
    trace = scenario_runs("overlap_schedule").trace
    formed = {ev.round: ev for ev in batches(trace)}
    sampled = {ev.get("batch_round"): ev for ev in events(trace, "sched.sampled")}
    assert formed[2].get("input_ids") == [-1, -2]
    assert forward_of(trace, 2).get("input_ids") == sampled[1].get("token_ids") and sampled[1].round == 2
    ids = formed[4].get("input_ids")
    assert formed[4].rids == ["A", "B", "C"] and ids[:2] == sampled[2].get("token_ids") and ids[2] == -5
    assert [(ev.round, ev.rid) for ev in events(trace, "sched.finished")] == [(5, "A"), (5, "C"), (8, "B")]
    assert sampled[5].rids == ["B"]  # A's and C's tokens of round 5 are dropped
    freed = events(trace, "kv.free", lambda ev: ev.get("reason") == "finished")
    assert [(ev.round, ev.get("slots")) for ev in freed] == [(6, [14]), (6, [16]), (9, [19])]
