"""The admission view on a real engine trace (the `admission_budgets` scenario): the starting budgets with
their arithmetic, a row per candidate with every budget before → after, the budget that refused each one
filled, the requests never considered, the rounds where no adder ran; as DOT, SVG, Mermaid and on the CLI."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from minisgl.cli import main
from tests.diagrams.helpers import ENGINE, HAS_DOT, NO_DOT, check_dot_structure, node_ids, parse_with_dot
from tracer.admission import admission_rounds
from tracer.diagrams import render_diagram
from tracer.diagrams.admission_table import CANDIDATE_COLUMNS, REFUSED_CELL
from tracer.reader import load_trace

pytestmark = pytest.mark.slow
TR = re.compile(r"<TR>(.*?)</TR>")
TD = re.compile(r'<TD([^>]*)>(.*?)</TD>')


@pytest.fixture(scope="module")
def folder(scenario_runs) -> Path:
    """The session's run of the `admission_budgets` scenario (shared with the scenario and replay-app tests)."""
    return Path(scenario_runs("admission_budgets").folder)


@pytest.fixture(scope="module")
def trace(folder):
    return load_trace(folder)


def table(dot: str, node: str) -> list[list[tuple[str, str]]]:
    """The rows of one node's HTML table: (attributes, text) per cell, markup and escapes removed."""
    label = dot.split(f"  {node} [label=<", 1)[1].split("</TABLE>>", 1)[0]
    return [[(attrs, re.sub(r"<[^>]+>", "", text).replace("&gt;", ">")) for attrs, text in TD.findall(tr)]
            for tr in TR.findall(label)]


def texts(rows) -> list[list[str]]:
    return [[text for _, text in row] for row in rows]


def test_round_1_table_is_the_adders_arithmetic(trace):
    dot = render_diagram(trace, "admission", "dot", round=1)
    check_dot_structure(dot)
    assert texts(table(dot, "round1")) == [
        ["round 1 · PrefillAdder"],
        ["starting budgets"],
        ["rem_total_tokens", "available 48 + evictable 0 − reserved 0 = 48"],
        ["rem_input_tokens", "max_prefill_tokens 10 − mixed_decode_rows 0 = 10"],
        ["rem_chunk_tokens", "chunked_prefill_size = 8"],
        ["rem_kv_room", "available 48 + evictable 0 = 48"],
        ["rem_running", "max_running_requests 3 − 0 running = 3"],
        ["running: none", "reserved_tokens = 0 (nothing running)"],
        list(CANDIDATE_COLUMNS),
        ["1", "A", "waiting_queue", "6", "6", "0", "admitted [0, 6)"],
        ["2", "B", "waiting_queue", "8", "6", "0",
         "refused by max_prefill_tokens: extend 8 > rem_input_tokens 4"],
    ]
    # the budgets transposed, beside each other for a candidate: spent down from left to right
    assert texts(table(dot, "round1_budgets")) == [
        ["budget", "1 · A", "2 · B"],
        ["rem_total_tokens", "48 → 36", "36"],
        ["rem_input_tokens", "10 → 4", "4"],
        ["rem_chunk_tokens", "8 → 2", "2"],
        ["rem_kv_room", "48 → 42", "42"],
        ["rem_running", "3 → 2", "2"],
    ]


def test_reserved_tokens_show_their_sum(trace):
    dot = render_diagram(trace, "admission", "dot", round=3)
    rows = texts(table(dot, "round3"))
    assert ["running: A, B", "reserved_tokens = (5 + 5 = 10) × new_token_ratio 0.7 = 7"] in rows
    assert ["rem_total_tokens", "available 34 + evictable 0 − reserved 7 = 27"] in rows


@pytest.mark.parametrize("n,rid,budget,why", [
    (1, "B", "rem_input_tokens", "refused by max_prefill_tokens: extend 8 > rem_input_tokens 4"),
    (2, "C", "rem_chunk_tokens", "refused by chunked_prefill_size: rem_chunk_tokens 0 left"),
    (3, "D", "rem_running", "refused by max_running_requests: rem_running 0 left"),
    (10, "E", "rem_total_tokens", "refused by kv_cache: need 47 (extend 3 + future 44) > 43.305"),
])
def test_each_refusal_fills_the_budget_that_refused_it(trace, n, rid, budget, why):
    dot = render_diagram(trace, "admission", "dot", round=n)
    rows = table(dot, f"round{n}")
    refused = [row for row in rows if len(row) == len(CANDIDATE_COLUMNS) and row[1][1] == rid]
    assert len(refused) == 1
    assert refused[0][-1][1] == why
    budgets = table(dot, f"round{n}_budgets")
    column = [text for _, text in budgets[0]].index(f"{refused[0][0][1]} · {rid}")
    filled = [row[0][1] for row in budgets[1:] if f'BGCOLOR="{REFUSED_CELL}"' in row[column][0]]
    assert filled == [budget]
    others = [row[k] for row in budgets[1:] for k in range(1, len(row)) if k != column]
    assert all(REFUSED_CELL not in attrs for attrs, _ in others)  # admitted candidates: nothing filled


def test_the_requests_never_considered(trace):
    rows = texts(table(render_diagram(trace, "admission", "dot", round=3), "round3"))
    assert rows[-1] == [("never considered: E (the round stopped at D: refused by max_running_requests: "
                         "rem_running 0 left)")]
    assert not any(r[0].startswith("never considered") for r in texts(table(
        render_diagram(trace, "admission", "dot", round=1), "round1")))


def test_a_round_without_an_adder_says_why(trace):
    dot = render_diagram(trace, "admission", "dot", round=4)
    assert node_ids(dot) == ["round4_skipped"]
    assert texts(table(dot, "round4_skipped")) == [
        ["round 4: no PrefillAdder ran (get_new_batch_prefill returned early)"],
        ["reason", "num_running", "max_running_requests", "waiting"],
        ["max_running_requests", "3", "3", "D, E"],
    ]


def test_default_round_and_rid(trace):
    assert render_diagram(trace, "admission", "dot") == render_diagram(trace, "admission", "dot", round=1)
    assert "round 3 · PrefillAdder" in render_diagram(trace, "admission", "dot", rid="E")  # never considered there
    assert "round 2 · PrefillAdder" in render_diagram(trace, "admission", "dot", rid="C")


def test_all_rounds_draw_every_round_with_admission(trace):
    dot = render_diagram(trace, "admission", "dot", all_rounds=True)
    check_dot_structure(dot)
    assert admission_rounds(trace) == list(range(1, 12))
    assert [n for n in node_ids(dot) if not n.endswith("_budgets")] == [
        "round1", "round2", "round3", "round4_skipped", "round5_skipped", "round6_skipped", "round7",
        "round8_skipped", "round9_skipped", "round10", "round11"]
    assert "round1_budgets" in node_ids(dot) and "round4_skipped_budgets" not in node_ids(dot)


@pytest.mark.skipif(not HAS_DOT, reason=NO_DOT)
def test_graphviz_draws_it_without_a_warning(trace):
    svg = parse_with_dot(render_diagram(trace, "admission", "dot", all_rounds=True))
    assert "refused by kv_cache:" in svg and "need 47 (extend 3 + future 44) &gt; 43.305" in svg  # two lines
    assert render_diagram(trace, "admission", "svg", round=3).startswith(b"<?xml")


def test_mermaid_is_a_flowchart_of_candidates_and_decisions(trace):
    text = render_diagram(trace, "admission", "mermaid", round=3)
    lines = text.splitlines()
    assert lines[:4] == ["---", 'title: "Admission in round 3"', "---", "flowchart TD"]
    for line in ['    r3_c1["C<br/>extend 2 · future 4 · locked 0"]',
                 "    r3_start --> r3_c1 --> r3_d1",
                 "    class r3_d1 admitted",
                 '    r3_d2("refused by max_running_requests: rem_running 0 left")',
                 "    r3_d1 --> r3_c2 --> r3_d2",
                 "    class r3_d2 refused",
                 '    r3_nc["never considered: E"]',
                 "    r3_d2 -.-> r3_nc"]:
        assert line in lines, line
    assert "rem_total_tokens 27 → 21" in text
    every = render_diagram(trace, "admission", "mermaid", all_rounds=True)
    assert [ln for ln in every.splitlines() if ln.startswith("    subgraph")] == [
        f'    subgraph r{n}["round {n}"]' for n in range(1, 12)]
    assert every.count("\n    end\n") == 11
    assert "#gt; 43.305" in every  # '>' as Mermaid's entity, so the label parses


def test_cli_writes_the_view_without_rid(folder, capsys):
    assert main(["trace", "export", str(folder), "--view", "admission", "--format", "dot"]) == 0
    assert "round 1 · PrefillAdder" in (folder / "admission.dot").read_text()
    assert main(["trace", "export", str(folder), "--view", "admission", "--round", "10", "--format",
                 "mermaid"]) == 0
    assert "class r10_d1 refused" in (folder / "admission-round10.mmd").read_text()
    assert "(admission, mermaid, " in capsys.readouterr().out


def test_a_version_1_trace_is_one_clear_line(capsys):
    assert main(["trace", "export", str(ENGINE), "--view", "admission", "--format", "dot", "-o", "-"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith("minisgl trace export: error: this trace predates the admission budgets (schema 2)")
