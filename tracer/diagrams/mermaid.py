"""Mermaid text for the lesson pages: the lifecycle as a sequenceDiagram (the same handoffs and links as
the Graphviz view) and the radix tree as a flowchart. A browser draws Mermaid; no Graphviz needed."""

from __future__ import annotations

import json

from tracer.diagrams.dot import visible
from tracer.diagrams.handoffs import Handoff, Lifecycle, Link
from tracer.diagrams.lang import tr
from tracer.diagrams.lanes import base_lane, lane_titles
from tracer.diagrams.radix_tree import PATH_COLOR, RadixPicture
from tracer.diagrams.text import TREE_EVICTABLE, TREE_LOCKED

ACTOR = {"tm": "TM", "dp": "DP", "sched": "S", "model": "M", "detok": "D"}
_CODES = {"#": "#35;", ";": "#59;", "<": "#lt;", ">": "#gt;", '"': "#quot;", "&": "#amp;"}


def escape(text: str) -> str:
    """Text in the diagram's language, with Mermaid entity codes for the characters its grammar reads
    (# ; < > " &), so any token text is safe."""
    return "".join(_CODES.get(c, c) for c in visible(tr(text)))


def _lines(*parts: str) -> str:
    return "<br/>".join(escape(p) for p in parts if p)


def _note(h: Handoff) -> str:
    head = f"{tr(h.type)} · {tr(h.what)}" if h.what else h.type
    return f"    Note over {_actor(h.lane)}: {_lines(head, *h.facts)}"


def _arrow(lk: Link, lanes: dict[str, str]) -> str:
    times = f" ×{lk.count}" if lk.count > 1 else ""
    arrow = "-->>" if lk.kind == "call" and lk.label == "next_token_ids" else "->>"
    text = _lines(lk.label + times, *lk.facts)
    return f"    {_actor(lanes[lk.src])}{arrow}{_actor(lanes[lk.dst])}: {text}"


def _actor(lane: str) -> str:
    """TM, S, M, D; in a merged trace prefixed by the server (prefill_S)."""
    server = lane.rsplit("/", 1)[0] + "_" if "/" in lane else ""
    return server + ACTOR[base_lane(lane)]


def lifecycle_mermaid(life: Lifecycle) -> str:
    lanes = {h.id: h.lane for h in life.handoffs}
    out = ["sequenceDiagram"]
    out += [f"    participant {_actor(lane)} as {escape(title)}"
            for lane, title in lane_titles(list(lanes.values()))]
    for a, b in life.folded:
        out.append(f"    %% rounds {a}-{b} are folded into one note per participant")
    for item in life.timeline():
        if isinstance(item, Handoff):
            out.append(_note(item))
        elif item.src in lanes and item.dst in lanes:
            out.append(_arrow(item, lanes))
    return "\n".join(out) + "\n"


def radix_mermaid(pictures: list[RadixPicture]) -> str:
    """One flowchart; with several rounds, a subgraph per round. Classes colour the nodes as the DOT
    view does: locked, evictable, and the request's path."""
    out = []
    if len(pictures) == 1:
        out += ["---", f"title: {json.dumps(visible(tr(pictures[0].title)), ensure_ascii=False)}", "---"]
    out += ["flowchart TD",
            f"    classDef locked fill:{TREE_LOCKED}",
            f"    classDef evictable fill:{TREE_EVICTABLE}",
            f"    classDef path stroke:{PATH_COLOR},stroke-width:3px"]
    for pic in pictures:
        indent = "    "
        if len(pictures) > 1:
            out.append(f'    subgraph {pic.prefix}round["{escape(pic.title)}"]')
            indent = "        "
        for node in pic.nodes:
            out.append(f'{indent}{node.id}["{_lines(*node.lines)}"]')
        for edge in pic.edges:
            out.append(f'{indent}{edge.src} -->|"{_lines(*edge.lines)}"| {edge.dst}')
        if len(pictures) > 1:
            out.append("    end")
    for cls, test in (("locked", lambda n: n.lines[0] != "root" and n.lock_ref > 0),
                      ("evictable", lambda n: n.lines[0] != "root" and n.lock_ref == 0),
                      ("path", lambda n: n.on_path)):
        ids = [n.id for pic in pictures for n in pic.nodes if test(n)]
        if ids:
            out.append(f"    class {','.join(ids)} {cls}")
    return "\n".join(out) + "\n"
