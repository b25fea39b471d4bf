"""The round, kv and radix views draw exactly what replay rebuilds: the batch's rows, each KV slot's
owner, the radix tree's nodes and lock counts — checked for every round of every fixture."""

from __future__ import annotations

import re

import pytest

from tests.diagrams.helpers import (
    FIXTURES,
    HAS_DOT,
    check_dot_structure,
    edge_attrs,
    edges,
    node_ids,
    node_label,
    parse_with_dot,
)
from tracer.diagrams import render_diagram
from tracer.diagrams.dot import html_text
from tracer.diagrams.text import ALLOCATED, FREE, TREE_EVICTABLE, TREE_LOCKED, rid_colors
from tracer.fmt import short_rid
from tracer.reader import load_trace
from tracer.replay import replay
from tracer.state import TREE, UNASSIGNED
from tracer.tree import nested

ROUNDS = [(name, state.round) for name, folder in FIXTURES.items() for state in replay(load_trace(folder))]
TR = re.compile(r"<TR>(.*?)</TR>")
TD = re.compile(r"<TD[^>]*>(.*?)</TD>")
SLOT = re.compile(r'<TD PORT="s(\d+)" BGCOLOR="(#[0-9a-f]{6})">')


def state_of(trace, n):
    return next(s for s in replay(trace) if s.round == n)


def plain(cell: str) -> str:
    return re.sub(r"<[^>]+>", "", cell).replace("&#39;", "'").replace("&quot;", '"').replace("&amp;", "&")


@pytest.mark.parametrize("name,n", ROUNDS)
def test_round_rows_are_the_replayed_batch_rows(name, n):
    trace = load_trace(FIXTURES[name])
    dot = render_diagram(trace, "round", "dot", round=n)
    check_dot_structure(dot)
    rows = [[plain(c) for c in TD.findall(tr)] for tr in TR.findall(dot)][2:]  # after the title and header
    batch = state_of(trace, n).batch
    assert len(rows) == len(batch.rows) > 0
    k = 0
    for cells, row in zip(rows, batch.rows):
        number, rid, position, input_id, _text, slot, kv, sampled = cells
        assert rid == short_rid(row.rid)
        assert int(position) == row.position
        assert input_id == str(row.input_id)
        assert slot == str(row.slot)
        assert kv == ("cached prefix" if row.cached else "new")
        assert number == ("" if row.cached else str(k))
        k += 0 if row.cached else 1
        assert sampled.startswith(f"→ {row.token}") if row.sampled else sampled == ""
    assert k == len(batch.forward_rows) == len(batch.out_cache_loc)


def test_round_view_shows_the_prefix_hit_and_the_sampled_text():
    dot = render_diagram(load_trace(FIXTURES["engine_two_requests"]), "round", "dot", rid="req-b")
    assert "round 2 · EXTEND · 2 requests · 3 rows computed · 8 cached prefix rows shown" in dot
    assert "<B>req-b</B>" in dot and "→ 50 ' x'" in dot


def test_round_view_labels_prompt_tokens_with_the_text_the_tokenizer_manager_traced():
    trace = load_trace(FIXTURES["server_chat"])
    tokenized = next(ev for ev in trace.events if ev.name == "tm.tokenized")
    ids, texts = tokenized.get("input_ids"), tokenized.get("input_texts")
    assert len(ids) == len(texts) and "".join(texts) == tokenized.get("text")
    dot = render_diagram(trace, "round", "dot", round=1)
    for tid, text in zip(ids, texts):  # every prompt row: its id next to its own text
        assert f"<TD>{tid}</TD><TD>{html_text(repr(text))}</TD>" in dot


def expected_color(trace, state, slot: int) -> str:
    owner = state.slot_owner.get(slot)
    if owner is None:
        return FREE
    if owner == TREE:
        locked = any(slot in n["value"] for n in state.tree if n["lock_ref"] > 0 and n["parent"] is not None)
        return TREE_LOCKED if locked else TREE_EVICTABLE
    if owner == UNASSIGNED:
        return ALLOCATED
    return rid_colors(trace)[owner]


@pytest.mark.parametrize("name,n", ROUNDS)
def test_kv_cells_are_coloured_by_the_replayed_owner(name, n):
    trace = load_trace(FIXTURES[name])
    dot = render_diagram(trace, "kv", "dot", round=n)
    check_dot_structure(dot)
    state = state_of(trace, n)
    cells = {int(s): color for s, color in SLOT.findall(dot)}
    used = max(state.slot_owner, default=0)
    assert set(range(1, used + 1)) <= set(cells)
    for slot, color in cells.items():
        assert color == expected_color(trace, state, slot), slot
    folded = re.findall(r"slots (\d+)–(\d+): free", dot)  # whole rows of free slots, one line each
    shown = set(cells) | {s for a, b in folded for s in range(int(a), int(b) + 1)}
    assert shown == set(range(1, state.kv_size + 1))
    assert f"{state.kv_size} slots, {state.free_slots} free" in dot


def test_kv_view_of_a_big_pool_folds_the_free_rows():
    trace = load_trace(FIXTURES["server_chat"])
    dot = render_diagram(trace, "kv", "dot")  # the last round: 44 slots used of 4096
    assert "slots 51–4096: free" in dot  # rows of 10 slots
    assert len(SLOT.findall(dot)) == 50  # the rows that hold a used slot, 5 rows of 10


@pytest.mark.parametrize("name,n", ROUNDS)
def test_radix_nodes_are_the_replayed_tree(name, n):
    trace = load_trace(FIXTURES[name])
    dot = render_diagram(trace, "radix", "dot", round=n)
    check_dot_structure(dot)
    tree = nested(state_of(trace, n).tree)
    want_nodes, want_edges = {}, set()

    def walk(node, parent):
        want_nodes[f"n{node['id']}"] = node
        if parent is not None:
            want_edges.add((f"n{parent['id']}", f"n{node['id']}"))
        for child in node["children"]:
            walk(child, node)

    walk(tree, None)
    assert set(node_ids(dot)) == set(want_nodes)
    assert set(edges(dot)) == want_edges
    for node_id, node in want_nodes.items():
        assert f"lock_ref {node['lock_ref']}" in node_label(dot, node_id)
    for src, dst in want_edges:
        key = " ".join(map(str, want_nodes[dst]["key"][:8]))
        assert f'label="{key}' in edge_attrs(dot, src, dst)


def test_radix_path_of_a_request_is_marked():
    trace = load_trace(FIXTURES["engine_two_requests"])
    dot = render_diagram(trace, "radix", "dot", rid="req-a", round=5)
    marked = {n for n in node_ids(dot) if 'color="#c0392b"' in node_label(dot, n)}
    assert marked == {"n0", "n1", "n2", "n4", "n6"}  # req-a: prompt 10..15, then 40 and 41
    assert "n3" in node_ids(dot)  # req-b's branch [20] is drawn, not marked


@pytest.mark.parametrize("view", ["round", "kv", "radix"])
@pytest.mark.parametrize("name", list(FIXTURES))
def test_all_rounds_draws_each_round_once(view, name):
    trace = load_trace(FIXTURES[name])
    dot = render_diagram(trace, view, "dot", all_rounds=True)
    check_dot_structure(dot)
    rounds = [s.round for s in replay(trace)]
    if view == "radix":
        assert [int(r) for r in re.findall(r"subgraph cluster_round(\d+)", dot)] == rounds
    else:
        titles = re.findall(r"(?:<B>round (\d+) ·|KV pool at the end of round (\d+):)", dot)
        assert [int(a or b) for a, b in titles] == rounds
    if HAS_DOT:
        parse_with_dot(dot)


def test_default_round_is_the_requests_first_or_the_last():
    trace = load_trace(FIXTURES["engine_two_requests"])
    assert "<B>round 2 ·" in render_diagram(trace, "round", "dot", rid="req-b")
    assert "<B>round 1 ·" in render_diagram(trace, "round", "dot", rid="req-a")
    assert "<B>round 5 ·" in render_diagram(trace, "round", "dot")
    assert "end of round 5" in render_diagram(trace, "radix", "dot")


def _copy_without(tmp_path, source, drop) -> object:
    """A copy of a fixture trace without the events `drop(record)` picks (a trace cut short, say)."""
    import json

    dst = tmp_path / source.name
    dst.mkdir()
    for path in source.glob("*.jsonl"):
        records = [json.loads(line) for line in path.read_text().splitlines()]
        (dst / path.name).write_text("".join(json.dumps(r) + "\n" for r in records if not drop(r)))
    return load_trace(dst)


def test_a_round_still_running_is_drawn_from_its_events_so_far(tmp_path):
    # a server still writing: round 2 formed its batch, its sched.round_end is not written yet
    trace = _copy_without(tmp_path, FIXTURES["server_one_request"],
                          lambda r: r.get("round") == 2 and r["name"] == "sched.round_end")
    assert trace.rounds() == [1, 2]
    dot = render_diagram(trace, "round", "dot", round=2)
    assert "<B>round 2 · DECODE · 1 request · 1 row computed</B>" in dot
    assert 'PORT="s4"' in render_diagram(trace, "kv", "dot", round=2)


def test_a_request_that_never_ran_has_no_default_round(tmp_path):
    from tracer.diagrams import DiagramError

    # req-b as if it had been refused: it never appears in a batch
    trace = _copy_without(tmp_path, FIXTURES["engine_two_requests"],
                          lambda r: r["name"] == "sched.batch_formed" and "req-b" in r.get("rids", []))
    with pytest.raises(DiagramError, match="request req-b never ran in a batch, so it has no round to draw"):
        render_diagram(trace, "round", "dot", rid="req-b")
