"""Diagrams of a trace: one request's lifecycle across processes and rounds, a round's batch, the KV
pool, the radix tree and a round's admission, as Graphviz DOT (and SVG/PNG through the `dot` program)
or Mermaid text.

    from tracer.reader import load_trace
    from tracer.diagrams import render_diagram, write_diagram

    trace = load_trace("my-trace")
    dot_text = render_diagram(trace, "lifecycle", "dot", rid="req-a")
    write_diagram(trace, "kv.svg", "kv", "svg", round=3)

Output depends on the trace alone (no times, pids or dict order), so it can be kept as a golden file.
"""

from __future__ import annotations

from pathlib import Path

from tracer.diagrams.errors import DiagramError
from tracer.diagrams.graph import Graph
from tracer.diagrams.graphviz import GraphvizMissing, dot_program
from tracer.diagrams.lang import LANGS, language
from tracer.reader import Trace

VIEWS = ("lifecycle", "round", "kv", "radix", "admission")
FORMATS = ("dot", "svg", "png", "mermaid")
MERMAID_VIEWS = ("lifecycle", "radix", "admission")
SUFFIX = {"dot": ".dot", "svg": ".svg", "png": ".png", "mermaid": ".mmd"}

__all__ = [
    "FORMATS",
    "LANGS",
    "MERMAID_VIEWS",
    "SUFFIX",
    "VIEWS",
    "DiagramError",
    "GraphvizMissing",
    "build_graph",
    "dot_program",
    "render_diagram",
    "write_diagram",
]


def _check(view: str, fmt: str, round: int | None, all_rounds: bool) -> None:
    if view not in VIEWS:
        raise DiagramError(f"unknown view {view!r}: expected one of {', '.join(VIEWS)}")
    if fmt not in FORMATS:
        raise DiagramError(f"unknown format {fmt!r}: expected one of {', '.join(FORMATS)}")
    if fmt == "mermaid" and view not in MERMAID_VIEWS:
        drawn = ", ".join(MERMAID_VIEWS[:-1]) + " and " + MERMAID_VIEWS[-1]
        raise DiagramError(f"the {view} view has no mermaid form (mermaid draws {drawn}); "
                           "use --format dot, svg or png")
    if round is not None and all_rounds:
        raise DiagramError("give --round N or --all-rounds, not both")


def build_graph(trace: Trace, view: str, rid: str | None = None, round: int | None = None,
                all_rounds: bool = False) -> Graph:
    """The view as a Graph (what the DOT text is printed from)."""
    _check(view, "dot", round, all_rounds)
    from tracer.diagrams import select

    if view == "lifecycle":
        from tracer.diagrams.lifecycle import lifecycle_view

        full = select.request_for(trace, rid, view)
        if round is not None:
            select.pick_round(trace, full, round)  # only checks that the trace has it
        return lifecycle_view(trace, full, round, all_rounds)
    trace = select.scheduler_view(trace, rid)  # --dp-size: the request's rank
    if view == "admission":
        from tracer.diagrams.admission_table import admission_graph

        rounds = select.admissions(trace, rid, round, all_rounds)
        return admission_graph(trace, rounds, select.resolve_rid(trace, rid))
    full = select.resolve_rid(trace, rid)
    n = select.pick_round(trace, full, None if all_rounds else round)
    if all_rounds:
        n = trace.rounds()[-1]
    states = select.replayed_rounds(trace, n)
    if view == "round":
        from tracer.diagrams.round_table import round_graph

        return round_graph(trace, states if all_rounds else states[-1:], full)
    if view == "kv":
        from tracer.diagrams.kv_pool import kv_graph

        return kv_graph(trace, states, all_rounds)
    from tracer.diagrams.radix_tree import radix_graph, radix_picture

    shown = states if all_rounds else states[-1:]
    return radix_graph([radix_picture(trace, s, full, prefix=f"r{s.round}_" if all_rounds else "")
                        for s in shown])


def _mermaid(trace: Trace, view: str, rid: str | None, round: int | None, all_rounds: bool) -> str:
    from tracer.diagrams import select
    from tracer.diagrams.mermaid import lifecycle_mermaid, radix_mermaid

    if view == "lifecycle":
        from tracer.diagrams.pd_lifecycle import any_lifecycle

        full = select.request_for(trace, rid, view)
        if round is not None:
            select.pick_round(trace, full, round)
        return lifecycle_mermaid(any_lifecycle(trace, full, all_rounds, keep=round))
    trace = select.scheduler_view(trace, rid)  # --dp-size: the request's rank
    if view == "admission":
        from tracer.diagrams.admission_table import admission_mermaid

        return admission_mermaid(select.admissions(trace, rid, round, all_rounds))
    from tracer.diagrams.radix_tree import radix_picture

    full = select.resolve_rid(trace, rid)
    n = trace.rounds()[-1] if all_rounds and trace.rounds() else select.pick_round(trace, full, round)
    states = select.replayed_rounds(trace, n)
    shown = states if all_rounds else states[-1:]
    return radix_mermaid([radix_picture(trace, s, full, prefix=f"r{s.round}_" if all_rounds else "")
                          for s in shown])


def render_diagram(trace: Trace, view: str, fmt: str, rid: str | None = None, round: int | None = None,
                   all_rounds: bool = False, lang: str = "en") -> str | bytes:
    """The diagram as text (dot, mermaid) or image bytes (svg, png).

    view: lifecycle (needs a request: `rid`, or the trace's only one), round, kv or radix (these draw
    `round`, by default the request's first round, or the trace's last round without a request), or
    admission (`round`, by default the first round the request, or any request, waited for admission).
    In a --dp-size trace these four draw the scheduler of the request's rank (rank 0 without one).
    all_rounds: lifecycle draws every decode round instead of folding long runs; the others draw every
    round. lang: "en", or "zh" for the words in Chinese (the trace's names and token text stay as they are).
    Raises DiagramError (a TraceError) with a one-line reason; GraphvizMissing for svg/png without
    Graphviz's `dot` program.
    """
    _check(view, fmt, round, all_rounds)
    if lang not in LANGS:
        raise DiagramError(f"unknown language {lang!r}: expected one of {', '.join(LANGS)}")
    with language(lang):
        if fmt == "mermaid":
            return _mermaid(trace, view, rid, round, all_rounds)
        from tracer.diagrams.dot import to_dot

        text = to_dot(build_graph(trace, view, rid, round, all_rounds))
    if fmt == "dot":
        return text
    from tracer.diagrams.graphviz import run_dot

    return run_dot(text, fmt)


def write_diagram(trace: Trace, path: str | Path, view: str, fmt: str, rid: str | None = None,
                  round: int | None = None, all_rounds: bool = False, lang: str = "en") -> Path:
    """render_diagram, written to `path` (its folder must exist). Returns the path."""
    out = render_diagram(trace, view, fmt, rid, round, all_rounds, lang)
    path = Path(path)
    if isinstance(out, bytes):
        path.write_bytes(out)
    else:
        path.write_text(out, encoding="utf-8")
    return path
