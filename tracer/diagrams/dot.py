"""Print a `Graph` as Graphviz DOT text, escaping everything that came from the trace.

Token text can hold quotes, backslashes, newlines, `<`, `&` or half a UTF-8 character; none of it may
break the file. Attributes are printed sorted by name, so the text depends on the trace alone.
"""

from __future__ import annotations

import re

from tracer.diagrams.graph import Cluster, Edge, Graph, Html, Node
from tracer.diagrams.lang import tr

_PLAIN_ID = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# "]" too: Graphviz (2.43) rejects an HTML label whose text starts with it
_HTML_ESCAPES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "]": "&#93;"}


def visible(text: str) -> str:
    """Control characters (a newline inside a token, say) shown as escapes, so one line stays one line."""
    return "".join(repr(c)[1:-1] if ord(c) < 32 or ord(c) == 127 else c for c in text)


def html_text(text: str) -> str:
    """Text for inside an Html label, in the diagram's language: markup characters escaped, control
    characters made visible."""
    return "".join(_HTML_ESCAPES.get(c, c) for c in visible(tr(text)))


def quote(text: str) -> str:
    """A DOT double-quoted string. A "\\n" in `text` is a line break; every other backslash is literal."""
    lines = [visible(line).replace("\\", "\\\\").replace('"', '\\"') for line in text.split("\n")]
    return '"' + "\\n".join(lines) + '"'


def _id(name: str) -> str:
    return name if _PLAIN_ID.match(name) else quote(name)


def _value(value: str) -> str:
    return f"<{value}>" if isinstance(value, Html) else quote(str(value))


LABELS = ("label", "xlabel", "headlabel", "taillabel")  # what a reader reads: in the diagram's language


def _attr_list(attrs: dict[str, str]) -> str:
    return ", ".join(f"{k}={_value(tr(v) if k in LABELS and not isinstance(v, Html) else v)}"
                     for k, v in sorted(attrs.items()))


def _node(n: Node, indent: str) -> str:
    attrs = {"label": n.label, **n.attrs}
    return f"{indent}{_id(n.id)} [{_attr_list(attrs)}];"


def _edge(e: Edge, indent: str) -> str:
    tail = f" [{_attr_list(e.attrs)}]" if e.attrs else ""
    return f"{indent}{_id(e.src)} -> {_id(e.dst)}{tail};"


def _cluster(c: Cluster, indent: str) -> list[str]:
    lines = [f"{indent}subgraph {_id('cluster_' + c.id)} {{"]
    inner = indent + "  "
    for k, v in sorted({"label": c.label, **c.attrs}.items()):
        lines.append(f"{inner}{k}={_value(tr(v) if k in LABELS and not isinstance(v, Html) else v)};")
    for sub in c.clusters:
        lines += _cluster(sub, inner)
    lines += [_node(n, inner) for n in c.nodes]
    lines.append(f"{indent}}}")
    return lines


def to_dot(g: Graph) -> str:
    """The whole graph as DOT text, ending with a newline."""
    lines = [f"digraph {_id(g.name)} {{"]
    graph_attrs = dict(g.attrs)
    if g.label:
        graph_attrs["label"] = g.label
    if graph_attrs:
        lines.append(f"  graph [{_attr_list(graph_attrs)}];")
    if g.node_defaults:
        lines.append(f"  node [{_attr_list(g.node_defaults)}];")
    if g.edge_defaults:
        lines.append(f"  edge [{_attr_list(g.edge_defaults)}];")
    for c in g.clusters:
        lines += _cluster(c, "  ")
    lines += [_node(n, "  ") for n in g.nodes]
    lines += [_edge(e, "  ") for e in g.edges]
    lines.append("}")
    return "\n".join(lines) + "\n"
