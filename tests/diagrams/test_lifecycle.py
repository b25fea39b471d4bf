"""The lifecycle view: a box per process, a node for every handoff of the request, a labelled edge for
every message it crossed, rounds in order, and long runs of decode rounds folded with the right count."""

from __future__ import annotations

from itertools import pairwise

import pytest

from tests.diagrams.helpers import (
    CHAT,
    ENGINE,
    HAS_DOT,
    SERVER,
    check_dot_structure,
    cluster_nodes,
    clusters,
    edges,
    node_label,
    parse_with_dot,
    squashed,
)
from tracer.diagrams import build_graph, render_diagram
from tracer.diagrams.facts import EVENT_TYPE
from tracer.diagrams.handoffs import lifecycle
from tracer.reader import load_trace

CASES = [(ENGINE, "req-a"), (ENGINE, "req-b"), (SERVER, "s1"), (CHAT, None)]
LANE_TITLES = {"tm": "HTTP server + TokenizerManager", "sched": "Scheduler", "model": "ModelRunner",
               "detok": "Detokenizer"}


def only_rid(folder) -> str:
    return load_trace(folder).rids()[0]


def handoff_events(trace, rid):
    """The events at which the request has a type: what the lifecycle must show, one node each."""
    return [ev for ev in trace.by_rid(rid)
            if not ev.name.startswith("ipc.") and ev.ph != "E" and (ev.get("type") or ev.name in EVENT_TYPE)]


@pytest.mark.parametrize("folder,rid", CASES)
def test_dot_parses_and_has_the_four_process_boxes(folder, rid):
    trace = load_trace(folder)
    rid = rid or trace.rids()[0]
    dot = render_diagram(trace, "lifecycle", "dot", rid=rid)
    check_dot_structure(dot)
    assert clusters(dot) == ["tm", "sched", "model", "detok"]
    for title in LANE_TITLES.values():  # a title may be wrapped into lines
        assert squashed(f'label="{title}') in squashed(dot), title
    if HAS_DOT:
        svg = squashed(parse_with_dot(dot))
        assert all(squashed(title) in svg for title in LANE_TITLES.values())


@pytest.mark.parametrize("folder,rid", CASES)
@pytest.mark.parametrize("all_rounds", [False, True])
def test_every_handoff_has_a_node_labelled_with_its_type(folder, rid, all_rounds):
    trace = load_trace(folder)
    rid = rid or trace.rids()[0]
    life = lifecycle(trace, rid, all_rounds=all_rounds)
    dot = render_diagram(trace, "lifecycle", "dot", rid=rid, all_rounds=all_rounds)
    where = {ev.index: h for h in life.handoffs for ev in h.events}
    for ev in handoff_events(trace, rid):
        assert ev.index in where, f"{ev.name} (seq {ev.seq}) has no node"
        h = where[ev.index]
        typ = ev.get("type") or EVENT_TYPE[ev.name]
        assert squashed(typ) in squashed(node_label(dot, h.id)), (typ, h.id)  # a long name may be wrapped
        assert h.id in cluster_nodes(dot, {"http": "tm", "tm": "tm", "sched": "sched", "model": "model",
                                           "detok": "detok"}[ev.lane])


@pytest.mark.parametrize("folder,rid", CASES)
def test_every_message_of_the_request_is_an_edge(folder, rid):
    trace = load_trace(folder)
    rid = rid or trace.rids()[0]
    life = lifecycle(trace, rid, all_rounds=True)
    dot = render_diagram(trace, "lifecycle", "dot", rid=rid, all_rounds=True)
    sends = [ev for ev in trace.by_rid(rid) if ev.name == "ipc.send"]
    messages = [lk for lk in life.links if lk.kind == "message"]
    assert sorted(lk.label for lk in messages) == sorted(ev.get("msg") for ev in sends)
    drawn = set(edges(dot))
    lane_of = {h.id: h.lane for h in life.handoffs}
    for lk in messages:
        assert (lk.src, lk.dst) in drawn
        assert lane_of[lk.src] != lane_of[lk.dst], f"{lk.label} should cross between processes"
        assert squashed(f'label="{lk.label}') in squashed(dot)


def test_server_message_path_follows_the_seeds():
    """Tokenizer manager -> scheduler -> detokenizer -> tokenizer manager, in that order."""
    life = lifecycle(load_trace(SERVER), "s1")
    lane_of = {h.id: h.lane for h in life.handoffs}
    hops = [(lk.label, lane_of[lk.src], lane_of[lk.dst]) for lk in life.timeline() if getattr(lk, "kind", "") ==
            "message"]
    assert hops == [("TokenizedGenerateReqInput", "tm", "sched"), ("BatchTokenIDOutput", "sched", "detok"),
                    ("BatchStrOutput", "detok", "tm"), ("BatchTokenIDOutput", "sched", "detok"),
                    ("BatchStrOutput", "detok", "tm")]


@pytest.mark.parametrize("folder,rid", CASES)
def test_rounds_are_in_order(folder, rid):
    trace = load_trace(folder)
    rid = rid or trace.rids()[0]
    dot = render_diagram(trace, "lifecycle", "dot", rid=rid, all_rounds=True)
    life = lifecycle(trace, rid, all_rounds=True)
    batches = [h for h in life.in_lane("sched") if h.type == "ScheduleBatch"]
    rounds = [h.round for h in batches]
    expected = sorted({ev.round for ev in trace.by_rid(rid) if ev.name == "sched.batch_formed"})
    assert rounds == expected
    in_dot = [int(node_label(dot, n).split("round ")[1].split(" ")[0]) for n in cluster_nodes(dot, "sched")
              if "<B>ScheduleBatch</B>" in node_label(dot, n)]
    assert in_dot == expected
    sched = cluster_nodes(dot, "sched")
    chain = set(edges(dot))
    # the Scheduler's nodes are chained in timeline order (a batch reaches its result through the runner)
    model = {a for a, b in chain if a.startswith("model_")}
    for a, b in pairwise(sched):
        assert (a, b) in chain or any((a, m) in chain and (m, b) in chain for m in model), (a, b)


def test_engine_request_shows_chunk_retraction_and_prefix_hit():
    dot = render_diagram(load_trace(ENGINE), "lifecycle", "dot", rid="req-a")
    assert "<B>Req</B><BR/>retracted" in dot
    dot = dot.replace("<BR/>", " ")  # a label's long line is wrapped at its spaces
    assert "PrefillAdder: chunked [0, 4)" in dot
    assert "thrown away: the prompt is still being chunked" in dot
    assert "match_prefix: 7 tokens cached" in dot  # re-admitted after the retraction with a prefix hit
    assert "offline Engine: one process" in dot


def decode_rounds(trace, rid) -> list[int]:
    return [ev.round for ev in trace.by_rid(rid)
            if ev.name == "sched.batch_formed" and ev.get("forward_mode") == "DECODE"]


def test_a_long_decode_run_folds_with_the_right_count():
    trace = load_trace(CHAT)
    rid = trace.rids()[0]
    decode = decode_rounds(trace, rid)
    assert decode == list(range(2, 9))  # the fixture: one prefill round, seven decode rounds
    finishing = next(ev.round for ev in trace.by_rid(rid) if ev.name == "sched.output_appended" and ev.get("finished"))
    first, last = decode[1], finishing - 1  # the first decode round and the finishing one stay
    life = lifecycle(trace, rid)
    assert life.folded == [(first, last)]
    steps = last - first + 1
    graph = build_graph(trace, "lifecycle", rid=rid)
    sched = graph.node(f"sched_{first}_{last}")
    sched.label = sched.label.replace("</B><BR/><B>", " ").replace("<BR/>", " ")  # long lines wrap at spaces
    assert f"rounds {first}–{last}: {steps} decode steps" in sched.label
    assert f"ScheduleBatch ×{steps}, GenerationBatchResult ×{steps}" in sched.label
    assert f"ForwardBatch ×{steps}" in graph.node(f"model_{first}_{last}").label
    assert f"BatchStrOutput ×{steps}" in graph.node(f"detok_{first}_{last}").label
    sampled = "".join(ev.get("texts")[0] for ev in trace.by_rid(rid)
                      if ev.name == "sched.sampled" and first <= ev.round <= last)
    assert sampled == " of China is Beijing."
    assert f"sampled {sampled!r}" in sched.label
    folded = [lk for lk in life.links if lk.count > 1]
    assert sorted((lk.label, lk.count) for lk in folded) == sorted(
        [("run_batch", steps), ("next_token_ids", steps), ("BatchTokenIDOutput", steps), ("BatchStrOutput", steps)])
    # the folded rounds draw no node of their own
    assert not [h for h in life.handoffs if h.folded is None and h.round is not None and first <= h.round <= last
                and h.lane in ("sched", "model")]


def test_all_rounds_draws_every_decode_step():
    trace = load_trace(CHAT)
    rid = trace.rids()[0]
    life = lifecycle(trace, rid, all_rounds=True)
    assert life.folded == []
    assert [h.round for h in life.in_lane("sched") if h.type == "GenerationBatchResult"] == list(range(1, 9))
    assert [h.round for h in life.in_lane("model")] == list(range(1, 9))
    assert sum(1 for h in life.in_lane("tm") if h.type == "SSE chunk") == 9
    assert all(lk.count == 1 for lk in life.links)


def test_a_chosen_round_stays_unfolded_and_is_highlighted():
    trace = load_trace(CHAT)
    rid = trace.rids()[0]
    assert lifecycle(trace, rid, keep=5).folded == [(3, 4), (6, 7)]
    graph = build_graph(trace, "lifecycle", rid=rid, round=5)
    thick = {n.id: n for n in graph.all_nodes() if n.attrs.get("penwidth") == "2.5"}
    in_runner = [n for i, n in thick.items() if i.startswith(("sched_", "model_"))]
    assert len(in_runner) == 3 and all("round 5" in n.label for n in in_runner)  # batch, forward, result
    # the detokenizer and tokenizer manager handled that round's tokens: they are highlighted too
    assert any(i.startswith("detok_") for i in thick) and any(i.startswith("tm_") for i in thick)


def test_short_runs_are_not_folded():
    for folder, rid in CASES[:3]:
        assert lifecycle(load_trace(folder), rid).folded == []


def test_mermaid_sequence_matches_the_lifecycle():
    trace = load_trace(CHAT)
    rid = trace.rids()[0]
    text = render_diagram(trace, "lifecycle", "mermaid", rid=rid)
    lines = text.splitlines()
    assert lines[0] == "sequenceDiagram"
    assert [ln.split(" as ")[0].strip() for ln in lines if ln.strip().startswith("participant")] == [
        "participant TM", "participant S", "participant M", "participant D"]
    life = lifecycle(trace, rid)
    notes = [ln for ln in lines if ln.strip().startswith("Note over")]
    assert len(notes) == len(life.handoffs)
    arrows = [ln.strip() for ln in lines if "->>" in ln]
    assert len(arrows) == sum(1 for lk in life.links if lk.kind != "lane")
    assert arrows[0] == "TM->>S: TokenizedGenerateReqInput"
    assert "S->>M: run_batch ×5" in arrows and "M-->>S: next_token_ids ×5" in arrows
    assert "#" not in text.replace("#35;", "").replace("#lt;", "").replace("#gt;", "").replace("#59;", "")


def test_a_trace_cut_while_the_request_waits_ends_with_it_waiting(tmp_path):
    """A server still running: s1 was admitted but its batch is not written yet."""
    import json

    keep = {"tokenizer_manager": 4, "scheduler": 6, "detokenizer": 0}  # last seq kept per process
    dst = tmp_path / "cut"
    dst.mkdir()
    for path in SERVER.glob("*.jsonl"):
        records = [json.loads(line) for line in path.read_text().splitlines()]
        (dst / path.name).write_text("".join(json.dumps(r) + "\n" for r in records if r["seq"] <= keep[r["proc"]]))
    life = lifecycle(load_trace(dst), "s1")
    last = life.in_lane("sched")[-1]
    assert (last.type, last.what) == ("Req", "waiting")
    assert last.facts == ["match_prefix: nothing cached", "PrefillAdder: admitted [0, 3)"]
    assert [h.type for h in life.handoffs] == ["CompletionRequest", "GenerateReqInput", "TokenizedGenerateReqInput",
                                               "Req", "Req"]
