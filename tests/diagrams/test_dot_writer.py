"""The DOT writer and the Mermaid escaping: any token text — quotes, backslashes, newlines, markup,
half a UTF-8 character — comes out as one valid, deterministic file that shows the text as it was."""

from __future__ import annotations

import json
import re

import pytest

from tests.diagrams.helpers import ENGINE, HAS_DOT, NO_DOT, check_dot_structure, node_label, parse_with_dot
from tracer.diagrams import render_diagram
from tracer.diagrams.dot import html_text, quote, to_dot
from tracer.diagrams.graph import Cluster, Edge, Graph, Html, Node
from tracer.diagrams.mermaid import escape
from tracer.diagrams.text import quoted
from tracer.reader import load_trace

NASTY = ['say "hi"', "back\\slash", "line\nbreak", "<b>&amp;</b>", "tab\there", "\\n literally", "北京",
         "\ufffd half", "}; digraph x {", "#59; ;#", "]", "\x07bell"]


def graph_of(texts: list[str]) -> Graph:
    nodes = [Node(f"n{i}", quoted(t), {"tooltip": t}) for i, t in enumerate(texts)]
    html = [Node(f"h{i}", Html(f"<B>{html_text(t)}</B>")) for i, t in enumerate(texts)]
    edges = [Edge(f"n{i}", f"h{i}", {"label": quoted(t)}) for i, t in enumerate(texts)]
    return Graph("escapes", label="tokens: " + " ".join(map(quoted, texts)),
                 clusters=[Cluster("plain", 'a "cluster"', nodes)], nodes=html, edges=edges)


def test_escaped_text_keeps_the_structure():
    dot = to_dot(graph_of(NASTY))
    check_dot_structure(dot)
    # digraph, graph, cluster open and label, a line per node and edge, two closing braces: no text broke a line
    assert len(dot.splitlines()) == 4 + 3 * len(NASTY) + 2
    assert node_label(dot, "n0").startswith('label="\'say \\"hi\\"\'"')
    assert "\\\\\\\\slash" in node_label(dot, "n1")  # repr's two backslashes, each escaped for DOT
    assert "&lt;b&gt;&amp;amp;&lt;/b&gt;" in node_label(dot, "h3")
    assert "北京" in dot


@pytest.mark.skipif(not HAS_DOT, reason=NO_DOT)
def test_graphviz_reads_back_every_text():
    svg = parse_with_dot(to_dot(graph_of(NASTY)))
    titles = re.findall(r"<text[^>]*>(.*?)</text>", svg)
    unescaped = [t.replace("&#39;", "'").replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">")
                 .replace("&amp;", "&").replace("&#160;", " ").replace("&#45;", "-") for t in titles]
    for text in ["北京", "<b>&amp;</b>", "'say \"hi\"'"]:
        assert any(text in t for t in unescaped), text
    assert any("'line\\nbreak'" in t for t in unescaped)  # shown as an escape, not a line break


def test_quote_makes_only_our_newlines_line_breaks():
    assert quote("a\nb") == '"a\\nb"'
    assert quote("a\\nb") == '"a\\\\nb"'  # a literal backslash-n stays literal
    assert quote('"') == '"\\""'
    assert quote("\x07") == '"\\\\x07"'


def test_attributes_print_sorted():
    dot = to_dot(Graph("g", nodes=[Node("a", "A", {"z": "1", "b": "2", "m": "3"})]))
    assert 'a [b="2", label="A", m="3", z="1"];' in dot


def test_non_identifier_ids_are_quoted():
    dot = to_dot(Graph("g", nodes=[Node("has space", "x"), Node("ok_1", "y")], edges=[Edge("has space", "ok_1")]))
    assert '"has space" -> ok_1;' in dot


def test_mermaid_escape_leaves_no_grammar_characters():
    for text in NASTY:
        out = escape(quoted(text))
        assert not re.search(r"[;<>\"]", re.sub(r"#\w+;", "", out)), out
        assert "\n" not in out
    assert escape("a;b#c") == "a#59;b#35;c"
    assert escape('"x"') == "#quot;x#quot;"


def test_mermaid_title_is_valid_yaml_text():
    text = render_diagram(load_trace(ENGINE), "radix", "mermaid", rid="req-a", round=3)
    front = text.split("---\n")[1]
    assert json.loads(front.removeprefix("title: ").strip()).startswith("Radix tree at the end of round 3")
