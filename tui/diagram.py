"""The `d` key: the current round's diagram, written next to the trace through tracer's exporter."""

from __future__ import annotations

from pathlib import Path

from tracer.reader import Trace


def round_diagram_path(trace: Trace, round: int) -> Path:
    return Path(trace.folder) / "diagrams" / f"round-{round}.dot"


def write_round_diagram(trace: Trace, round: int, rid: str | None = None) -> Path:
    """Write the `round` view of round `round` (the selected request highlighted) as Graphviz DOT.
    Raises ImportError when this tracer has no diagrams exporter, TraceError (DiagramError) or OSError."""
    from tracer.diagrams import write_diagram

    path = round_diagram_path(trace, round)
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_diagram(trace, path, "round", "dot", rid=rid, round=round)
