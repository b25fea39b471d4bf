"""A small graph model that every view builds and the DOT writer prints.

Views say *what* is drawn (nodes, edges, clusters, labels); `dot.py` alone knows DOT's syntax and
escaping. Tests read this model directly, so they check the picture's content, not its spelling.
"""

from __future__ import annotations

from dataclasses import dataclass, field


class Html(str):
    """A label already written as Graphviz's HTML-like markup (printed between < >, not quoted).
    Build it with `tracer.diagrams.dot.html_text` for any text that comes from the trace."""


@dataclass
class Node:
    id: str
    label: str  # plain text (lines joined by "\n") or Html
    attrs: dict[str, str] = field(default_factory=dict)


@dataclass
class Edge:
    src: str
    dst: str
    attrs: dict[str, str] = field(default_factory=dict)


@dataclass
class Cluster:
    """A `subgraph cluster_<id>`: a box around its nodes (a process, a round)."""

    id: str
    label: str
    nodes: list[Node] = field(default_factory=list)
    clusters: list[Cluster] = field(default_factory=list)
    attrs: dict[str, str] = field(default_factory=dict)

    def all_nodes(self) -> list[Node]:
        return self.nodes + [n for c in self.clusters for n in c.all_nodes()]


@dataclass
class Graph:
    name: str
    label: str = ""
    attrs: dict[str, str] = field(default_factory=dict)  # graph attributes (rankdir, fontname, ...)
    node_defaults: dict[str, str] = field(default_factory=dict)
    edge_defaults: dict[str, str] = field(default_factory=dict)
    clusters: list[Cluster] = field(default_factory=list)
    nodes: list[Node] = field(default_factory=list)
    edges: list[Edge] = field(default_factory=list)

    def all_nodes(self) -> list[Node]:
        return self.nodes + [n for c in self.clusters for n in c.all_nodes()]

    def node(self, node_id: str) -> Node:
        for n in self.all_nodes():
            if n.id == node_id:
                return n
        raise KeyError(node_id)
