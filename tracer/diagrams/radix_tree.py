"""The radix view: the prefix cache's tree at the end of a round, token ids (and text, where the trace
has it) on the edges, lock_ref and KV slots on the nodes, and the chosen request's path drawn bold."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tracer.diagrams.dot import html_text
from tracer.diagrams.graph import Cluster, Edge, Graph, Html, Node
from tracer.diagrams.text import TREE_EVICTABLE, TREE_LOCKED, cut, joined_text, quoted, token_ids, token_texts
from tracer.fmt import ranges, short_rid
from tracer.reader import Trace
from tracer.schema import TM_TOKENIZED
from tracer.state import RoundState
from tracer.tree import evictable_size, nested

PATH_COLOR = "#c0392b"


@dataclass
class RadixNode:
    id: str
    tree_id: int
    lock_ref: int
    slots: list[int]
    lines: list[str]
    on_path: bool = False


@dataclass
class RadixEdge:
    src: str
    dst: str
    key: list[int]
    lines: list[str]


@dataclass
class RadixPicture:
    """One round's tree, ready to print as DOT or Mermaid."""

    round: int | None
    prefix: str  # node-id prefix, so several rounds can share one graph
    title: str
    nodes: list[RadixNode] = field(default_factory=list)
    edges: list[RadixEdge] = field(default_factory=list)


def request_tokens(trace: Trace, state: RoundState, rid: str) -> list[int]:
    """The request's tokens as of this state: its prompt (tm.tokenized) and the output so far."""
    tokenized = (ev for ev in trace.by_rid(rid) if ev.name == TM_TOKENIZED)
    prompt = next((list(ev.get("input_ids") or []) for ev in tokenized), [])
    req = state.reqs.get(rid)
    return prompt + (list(req.output_ids) if req is not None else [])


def radix_picture(trace: Trace, state: RoundState, rid: str | None, prefix: str = "") -> RadixPicture:
    texts = token_texts(trace)
    nodes = state.tree
    cached = sum(len(n.get("key", [])) for n in nodes)
    title = (f"Radix tree at the end of round {state.round}: {cached} tokens cached, "
             f"{evictable_size(nodes)} evictable")
    if rid is not None:
        title += f"; red: the path of request {short_rid(rid)}"
    pic = RadixPicture(state.round, prefix, title)
    tokens = request_tokens(trace, state, rid) if rid is not None else []
    stamps = {n["id"]: n.get("last_access_time") for n in nodes}

    def walk(n: dict[str, Any], parent: str | None, pos: int, on_path: bool) -> None:
        node_id = f"{prefix}n{n['id']}"
        if parent is None:
            lines = ["root", f"lock_ref {n['lock_ref']}"]
        else:
            lines = [f"node {n['id']}", f"lock_ref {n['lock_ref']}", f"slots {ranges(n['value'])}"]
        if stamps.get(n["id"]) is not None:  # the LRU stamp: eviction takes the smallest first
            lines.append(f"last used at tick {stamps[n['id']]}")
        pic.nodes.append(RadixNode(node_id, n["id"], n["lock_ref"], list(n["value"]), lines, on_path))
        if parent is not None:
            text = joined_text(n["key"], texts)
            edge_lines = [token_ids(n["key"])] + ([quoted(cut(text, 24))] if text is not None else [])
            pic.edges.append(RadixEdge(parent, node_id, list(n["key"]), edge_lines))
        for child in n["children"]:
            key = child["key"]
            matched = 0
            if on_path:
                while (matched < len(key) and pos + matched < len(tokens)
                        and key[matched] == tokens[pos + matched]):
                    matched += 1
            walk(child, node_id, pos + matched, on_path and matched > 0)

    walk(nested(nodes), None, 0, rid is not None)
    return pic


def _cluster_nodes(pic: RadixPicture) -> list[Node]:
    out = []
    for n in pic.nodes:
        fill = "white" if n.lines[0] == "root" else (TREE_LOCKED if n.lock_ref > 0 else TREE_EVICTABLE)
        attrs = {"fillcolor": fill}
        if n.on_path:
            attrs.update(color=PATH_COLOR, penwidth="2.5")
        out.append(Node(n.id, Html("<BR/>".join(html_text(x) for x in n.lines)), attrs))
    return out


def _edges(pic: RadixPicture) -> list[Edge]:
    on_path = {n.id for n in pic.nodes if n.on_path}
    out = []
    for e in pic.edges:
        attrs = {"label": "\n".join(e.lines)}
        if e.dst in on_path:
            attrs.update(color=PATH_COLOR, penwidth="2.2")
        out.append(Edge(e.src, e.dst, attrs))
    return out


def radix_graph(pictures: list[RadixPicture]) -> Graph:
    g = Graph("radix", attrs={"rankdir": "TB", "labelloc": "t", "fontname": "Helvetica"},
              node_defaults={"shape": "box", "style": "rounded,filled", "fontname": "Helvetica",
                             "fontsize": "10"},
              edge_defaults={"fontname": "Helvetica", "fontsize": "9"})
    legend = "grey: locked by a running request (lock_ref > 0); light: evictable (lock_ref 0)"
    if len(pictures) == 1:
        g.label = pictures[0].title + "\n" + legend
        g.nodes = _cluster_nodes(pictures[0])
    else:
        g.label = "Radix tree, round by round\n" + legend
        g.clusters = [Cluster(f"round{p.round}", p.title, _cluster_nodes(p), attrs={"fontname": "Helvetica"})
                      for p in pictures]
    g.edges = [e for p in pictures for e in _edges(p)]
    return g
