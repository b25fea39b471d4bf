"""The round view: one round's batch as a table, a row per token as the seeds draw it — which request,
which input id (and its text), at which position, written to which KV slot (out_cache_loc), whether it
was a cached prefix or computed now (a draft token's row in a TARGET_VERIFY round), and whether its logits
were sampled."""

from __future__ import annotations

from tracer.diagrams.dot import html_text
from tracer.diagrams.graph import Edge, Graph, Html, Node
from tracer.diagrams.text import TREE_EVICTABLE, quoted, rid_colors, token, token_texts
from tracer.fmt import short_rid
from tracer.reader import Trace
from tracer.state import BatchRow, RoundState

COLUMNS = ("row", "request", "position", "input id", "text", "out_cache_loc", "KV", "sampled")


def row_cells(row: BatchRow, k: int | None, texts: dict[int, str]) -> list[str]:
    """The cells of one token's row, as text (k: its row in the forward, None for a cached prefix row)."""
    text = quoted(texts[row.input_id]) if row.input_id in texts else ""
    sampled = f"→ {token(row.token, texts)}" if row.sampled and row.token is not None else (
        "yes" if row.sampled else "")
    return ["" if k is None else str(k), short_rid(row.rid), str(row.position),
            "?" if row.input_id is None else str(row.input_id), text,
            "?" if row.slot is None else str(row.slot), _kv(row), sampled]


def _kv(row: BatchRow) -> str:
    return "cached prefix" if row.cached else "new (draft)" if row.draft else "new"


def table_rows(state: RoundState, texts: dict[int, str]) -> list[list[str]]:
    """Every row of the round's batch, as cells; computed rows numbered in forward order."""
    out, k = [], 0
    for row in state.batch.rows if state.batch else []:
        out.append(row_cells(row, None if row.cached else k, texts))
        if not row.cached:
            k += 1
    return out


def _html(state: RoundState, trace: Trace, rid: str | None) -> Html:
    texts = token_texts(trace)
    colors = rid_colors(trace)
    b = state.batch
    if b is None:
        return Html(f"<B>{html_text(f'round {state.round}: no batch')}</B>")
    cached = sum(1 for r in b.rows if r.cached)
    head = (f"round {state.round} · {b.mode} · {len(b.rids)} request{'s' if len(b.rids) != 1 else ''} · "
            f"{len(b.forward_rows)} row{'s' if len(b.forward_rows) != 1 else ''} computed"
            + (f" · {cached} cached prefix rows shown" if cached else "")
            + (f" · {drafts} of them draft rows" if (drafts := sum(r.draft for r in b.rows)) else ""))
    rows = [f'<TR><TD COLSPAN="{len(COLUMNS)}"><B>{html_text(head)}</B></TD></TR>',
            "<TR>" + "".join(f"<TD><B>{html_text(c)}</B></TD>" for c in COLUMNS) + "</TR>"]
    for row, cells in zip(b.rows, table_rows(state, texts)):
        tds = []
        for col, cell in zip(COLUMNS, cells):
            attrs = ""
            if col == "request":
                attrs = f' BGCOLOR="{colors.get(row.rid, "white")}"'
            elif col == "KV" and row.cached:
                attrs = f' BGCOLOR="{TREE_EVICTABLE}"'
            body = html_text(cell)
            if rid is not None and row.rid == rid and col == "request":
                body = f"<B>{body}</B>"
            tds.append(f"<TD{attrs}>{body}</TD>")
        rows.append("<TR>" + "".join(tds) + "</TR>")
    # a row per line: Graphviz ignores the line breaks between rows, and a golden file's diff stays readable
    return Html('<TABLE BORDER="0" CELLBORDER="1" CELLSPACING="0" CELLPADDING="3">\n' + "\n".join(rows)
                + "\n</TABLE>")


def round_graph(trace: Trace, states: list[RoundState], rid: str | None) -> Graph:
    g = Graph("round", attrs={"labelloc": "t", "fontname": "Helvetica"},
              node_defaults={"shape": "plaintext", "fontname": "Helvetica", "fontsize": "10"})
    g.label = ("The batch of a round: a row per token" if len(states) == 1 else "Every round's batch") + (
        f" (request {short_rid(rid)} in bold)" if rid is not None else "")
    g.nodes = [Node(f"round{s.round}", _html(s, trace, rid)) for s in states]
    g.edges = [Edge(a.id, b.id, {"style": "invis"}) for a, b in zip(g.nodes, g.nodes[1:])]
    return g
