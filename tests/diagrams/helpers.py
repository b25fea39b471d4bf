"""Shared by the diagram tests: the fixture traces, and checks of DOT text that need no Graphviz."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from tests.tracer.helpers import ENGINE, SERVER

HERE = Path(__file__).resolve().parent
CHAT = HERE / "fixtures" / "server_chat"  # a real served chat completion, 8 tokens (see its make script)
FIXTURES = {"engine_two_requests": ENGINE, "server_one_request": SERVER, "server_chat": CHAT}
HAS_DOT = shutil.which("dot") is not None
NO_DOT = "Graphviz's `dot` is not installed (make test installs it where it runs as root)"

NODE = re.compile(r"(\w+) \[(.*)\]\Z", re.DOTALL)
EDGE = re.compile(r"(\w+) -> (\w+)(?: \[(.*)\])?\Z", re.DOTALL)
CLUSTER = re.compile(r"subgraph cluster_(\w+)\Z")


def squashed(text: str) -> str:
    """Text with its markup, line breaks and spaces taken out: a label wrapped into lines (at a space, inside
    a CamelCase name, after an underscore) still contains what it wraps."""
    return re.sub(r"<[^>]*>|\\n|\s", "", text.replace("&#43;", "+"))


def _scan(dot: str, keep_text: bool = True) -> list[tuple[str, str]]:
    """DOT text as ("open", header) / ("stmt", statement) / ("close", "") items, split only at braces
    and semicolons outside quoted strings and HTML labels (which may span lines and hold anything)."""
    items, buf, i = [], [], 0
    while i < len(dot):
        c = dot[i]
        if c == '"':
            j = i + 1
            while dot[j] != '"':
                j += 2 if dot[j] == "\\" else 1
            buf.append(dot[i: j + 1] if keep_text else '""')
            i = j + 1
            continue
        if c == "<":
            depth, j = 0, i
            while True:
                depth += {"<": 1, ">": -1}.get(dot[j], 0)
                j += 1
                if depth == 0:
                    break
            buf.append(dot[i:j] if keep_text else "<>")
            i = j
            continue
        if c in "{};":
            text = "".join(buf).strip()
            buf = []
            if c == "{":
                items.append(("open", text))
            else:
                if text:
                    items.append(("stmt", text))
                if c == "}":
                    items.append(("close", ""))
        else:
            buf.append(c)
        i += 1
    if "".join(buf).strip():
        items.append(("stmt", "".join(buf).strip()))
    return items


def skeleton(dot: str) -> str:
    """The DOT text with every quoted string and HTML label cut out, so only its structure is left."""
    return " ".join({"open": f"{t} {{", "stmt": f"{t};", "close": "}"}[k] for k, t in _scan(dot, False))


def check_dot_structure(dot: str) -> None:
    """What the writer promises without running Graphviz: one digraph, balanced braces and brackets
    outside strings, every edge between declared nodes."""
    bare = skeleton(dot)
    assert bare.startswith("digraph ") and bare.rstrip().endswith("}")
    depth = 0
    for c in bare:
        depth += {"{": 1, "}": -1}.get(c, 0)
        assert depth >= 0
    assert depth == 0, "unbalanced braces"
    assert bare.count("[") == bare.count("]"), "unbalanced brackets"
    nodes = node_ids(dot)
    for src, dst in edges(dot):
        assert src in nodes and dst in nodes, (src, dst)


def parse_with_dot(dot: str) -> str:
    """Graphviz's own verdict: the SVG it draws; it must accept the text without a warning."""
    done = subprocess.run(["dot", "-Tsvg"], input=dot.encode(), capture_output=True, timeout=60, check=False)
    assert done.returncode == 0 and not done.stderr, done.stderr.decode()
    return done.stdout.decode()


def _statements(dot: str) -> list[str]:
    return [t for k, t in _scan(dot) if k == "stmt"]


def node_ids(dot: str) -> list[str]:
    return [m.group(1) for t in _statements(dot) if (m := NODE.match(t)) and m.group(1) not in
            ("graph", "node", "edge")]


def node_label(dot: str, node_id: str) -> str:
    for t in _statements(dot):
        m = NODE.match(t)
        if m and m.group(1) == node_id:
            return m.group(2)
    raise KeyError(node_id)


def edges(dot: str) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for t in _statements(dot) if (m := EDGE.match(t))]


def edge_attrs(dot: str, src: str, dst: str) -> str:
    return next(m.group(3) or "" for t in _statements(dot) if (m := EDGE.match(t)) and m.group(1, 2) == (src, dst))


def clusters(dot: str) -> list[str]:
    return [m.group(1) for k, t in _scan(dot) if k == "open" and (m := CLUSTER.match(t))]


def cluster_nodes(dot: str, cluster: str) -> list[str]:
    """The node ids declared inside `subgraph cluster_<cluster>`, in order."""
    out, stack = [], []
    for kind, text in _scan(dot):
        if kind == "open":
            m = CLUSTER.match(text)
            stack.append(m.group(1) if m else "")
        elif kind == "close":
            stack.pop()
        elif stack and stack[-1] == cluster and (m := NODE.match(text)) and m.group(1) not in ("graph", "node",
                                                                                              "edge"):
            out.append(m.group(1))
    return out
