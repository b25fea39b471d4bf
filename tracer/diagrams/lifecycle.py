"""The lifecycle view: one request's handoffs in a box per process, joined by the messages between
processes and the Scheduler's calls into the ModelRunner, top to bottom in the order they happened."""

from __future__ import annotations

import unicodedata

from tracer import schema as S
from tracer.diagrams.dot import html_text
from tracer.diagrams.graph import Cluster, Edge, Graph, Html, Node
from tracer.diagrams.handoffs import Handoff, Lifecycle, Link
from tracer.diagrams.lang import tr
from tracer.diagrams.lanes import base_lane, lane_titles
from tracer.reader import Trace

LANE_FILL = {"tm": "#eef5fb", "dp": "#fbf6e4", "sched": "#f3f0fa", "model": "#fdf3e7", "detok": "#eef8ee"}
PROCESS = {"tm": "main process", "dp": "data_parallel_controller process", "sched": "scheduler process",
           "model": "scheduler process", "detok": "detokenizer process"}


def process_title(lane: str, mine: list[Handoff], tp_procs: list[str]) -> str:
    """The lane's process: a --dp-size trace names the rank's scheduler (scheduler_dp1) that ran the request;
    a --tp-size trace says that the ModelRunner's forward ran on every rank; a --tokenizer-worker-num trace
    names the worker process that took the request (tokenizer_worker1)."""
    procs = {ev.proc for h in mine for ev in h.events}
    workers = {ev.get("tokenizer_worker") for h in mine for ev in h.events} - {None}
    if lane == "tm" and len(workers) == 1:
        return f"tokenizer_worker{next(iter(workers))} process"
    if lane in ("sched", "model") and len(procs) == 1 and next(iter(procs)).startswith(S.DP_SCHEDULER_PREFIX):
        proc = next(iter(procs))
        return f"{proc} process: dp rank {proc[len(S.DP_SCHEDULER_PREFIX):]}"
    if lane == "model" and tp_procs:
        return f"scheduler, {', '.join(tp_procs)} processes: tp ranks 0-{len(tp_procs)}"
    return PROCESS[lane]


WRAP = 22  # characters a line of a label holds, so that a lifecycle's lanes fit a lesson's column
TAIL = 4  # a last word this short stays on its line, even past WRAP
TITLE_WRAP = 19  # the same for a lane's title (12 pt): "HTTP server +" over "TokenizerManager"


def cells(text: str) -> int:
    """How wide `text` is in Latin characters: a Chinese character counts two."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def pieces(word: str, width: int = WRAP) -> list[str]:
    """A word wider than `width` in pieces, cut between Chinese characters or, in a name, after an underscore
    or inside CamelCase, as near its middle as can be (Tokenized|GenerateReqInput); else it stays whole."""
    name = "'" not in word  # not a token's text: '<|im_start|>' stays whole
    cuts = [i for i in range(1, len(word)) if cells(word[i - 1:i + 1]) > 2
            or name and (word[i - 1] == "_" or (word[i - 1].islower() and word[i].isupper()))]
    if cells(word) <= width or not cuts:
        return [word]
    cut = min(cuts, key=lambda c: abs(cells(word) - 2 * cells(word[:c])))
    return pieces(word[:cut], width) + pieces(word[cut:], width)


def wrapped(text: str, width: int = WRAP) -> list[str]:
    """A label's line, in the diagram's language, broken at spaces into lines of about `width` characters (a
    long word in pieces)."""
    text = tr(text)
    lines: list[str] = []
    words = text.split(" ")
    for n, word in enumerate(words):
        for i, piece in enumerate(pieces(word, width)):
            glue = "" if i else " "  # a word's next piece continues it on the same line when it fits
            short_end = n == len(words) - 1 and cells(word) <= TAIL  # not "… at position" over "37"
            if lines and cells(lines[-1] + glue + piece) <= width + (TAIL if short_end else 0):
                lines[-1] += glue + piece
            elif piece:
                lines.append(piece)
    return lines or [text]


def lane_title(title: str) -> str:
    """A lane's title in lines of about TITLE_WRAP characters; a merged trace's server ("prefill:") alone."""
    server, _, name = title.rpartition(": ")
    return "\n".join(([server + ":"] if server else []) + wrapped(name, TITLE_WRAP))


def handoff_label(h: Handoff) -> Html:
    lines = [f"<B>{html_text(part)}</B>" for part in wrapped(h.type)]
    lines += [html_text(part) for line in ([h.what] if h.what else []) + list(h.facts)
              for part in wrapped(line)]
    return Html("<BR/>".join(lines))


def _tooltip(h: Handoff) -> str:
    """Which trace records the node stands for: process and per-process seq, never a pid or a time."""
    shown = [f"{ev.proc}#{ev.seq} {ev.name}" for ev in sorted(h.events, key=lambda e: e.index)[:6]]
    more = len(h.events) - len(shown)
    return "\n".join(shown + ([f"… {more} more"] if more > 0 else []))


def _edge(lk: Link) -> Edge:
    times = f" ×{lk.count}" if lk.count > 1 else ""
    if lk.kind == "message":
        label = "\n".join(wrapped(lk.label + times) + [part for f in lk.facts for part in wrapped(f)])
        return Edge(lk.src, lk.dst, {"label": label, "color": "#1f5fa8", "fontcolor": "#1f5fa8",
                                     "penwidth": "1.6"})
    if lk.kind == "call":
        return Edge(lk.src, lk.dst, {"label": lk.label + times, "style": "dashed", "color": "#a0522d",
                                     "fontcolor": "#a0522d"})
    return Edge(lk.src, lk.dst, {"color": "#9a9a9a", "arrowsize": "0.6"})


def lifecycle_graph(life: Lifecycle, highlight: int | None = None) -> Graph:
    """The Graph of a Lifecycle; `highlight`: a round whose handoffs get a thick border."""
    where = "offline Engine: one process, lanes by event name" if life.offline else "one box per process"
    folded = "; ".join(f"rounds {a}–{b} folded" for a, b in life.folded)
    g = Graph("lifecycle",
              label=f"Lifecycle of request {life.rid} ({where})" + (f"\n{folded}" if folded else ""),
              attrs={"rankdir": "TB", "labelloc": "t", "fontname": "Helvetica", "newrank": "true",
                     "nodesep": "0.15", "ranksep": "0.35"},
              node_defaults={"shape": "box", "style": "rounded,filled", "fillcolor": "white",
                             "fontname": "Helvetica", "fontsize": "10"},
              edge_defaults={"fontname": "Helvetica", "fontsize": "10"})
    for lane, title in lane_titles([h.lane for h in life.handoffs]):
        mine = [h for h in life.handoffs if h.lane == lane]
        if not mine:
            continue
        process = f"({process_title(base_lane(lane), mine, life.tp_procs)})"
        sub = "" if life.offline else "\n" + "\n".join(wrapped(process, TITLE_WRAP))
        nodes = []
        for h in mine:
            attrs = {"tooltip": _tooltip(h)}
            if h.folded is not None:
                attrs["style"] = "rounded,filled,dashed"
            if highlight is not None and h.round == highlight and h.folded is None:
                attrs["penwidth"] = "2.5"
            nodes.append(Node(h.id, handoff_label(h), attrs))
        g.clusters.append(Cluster(lane, lane_title(title) + sub, nodes, attrs={"style": "filled,rounded",
                                                                   "fillcolor": LANE_FILL[base_lane(lane)],
                                                                   "color": "#b0b0b0",
                                                                   "fontname": "Helvetica",
                                                                   "fontsize": "12"}))
    calls = [(lk.src, lk.dst) for lk in life.links if lk.kind == "call"]
    via_runner = {(a, c) for a, b in calls for b2, c in calls if b == b2}  # ScheduleBatch -> … -> result
    g.edges = [_edge(lk) for lk in life.links if not (lk.kind == "lane" and (lk.src, lk.dst) in via_runner)]
    return g


def lifecycle_view(trace: Trace, rid: str, round: int | None = None, all_rounds: bool = False) -> Graph:
    from tracer.diagrams.pd_lifecycle import any_lifecycle

    return lifecycle_graph(any_lifecycle(trace, rid, all_rounds, keep=round), highlight=round)
