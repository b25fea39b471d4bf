"""The kv view: the KV pool (TokenToKVPool's slots) at the end of a round, a cell per slot coloured by
who holds it — a request, the radix tree (locked by a request's prefix, or cached and evictable), an
allocation not yet assigned — or free. Rows of free slots fold into one line, so a big pool stays small."""

from __future__ import annotations

from tracer.diagrams.dot import html_text
from tracer.diagrams.graph import Edge, Graph, Html, Node
from tracer.diagrams.text import (
    ALLOCATED,
    FREE,
    TREE_EVICTABLE,
    TREE_LOCKED,
    cut,
    quoted,
    rid_colors,
    token_texts,
)
from tracer.fmt import short_rid
from tracer.reader import Trace
from tracer.state import TREE, UNASSIGNED, RoundState
from tracer.tree import slot_tokens

COLUMNS = 10  # a row of slots fits a lesson's column at full text size
LOCKED, EVICTABLE, FREE_OWNER = "(tree, locked)", "(tree, evictable)", "(free)"
KIND_COLOR = {LOCKED: TREE_LOCKED, EVICTABLE: TREE_EVICTABLE, UNASSIGNED: ALLOCATED, FREE_OWNER: FREE}
KIND_TEXT = {LOCKED: "radix tree, locked by a request's prefix",
             EVICTABLE: "radix tree, cached and evictable", UNASSIGNED: "allocated, not yet assigned",
             FREE_OWNER: "free"}


def slot_kinds(state: RoundState) -> dict[int, str]:
    """Every slot of the pool (1 … kv_size; slot 0 is the padding slot) -> a rid, LOCKED, EVICTABLE,
    UNASSIGNED or FREE_OWNER."""
    locked = {s for n in state.tree if n.get("lock_ref", 0) > 0 and n.get("parent") is not None
              for s in n.get("value", [])}
    size = state.kv_size if state.kv_size is not None else max(state.slot_owner, default=0)
    out = {}
    for s in range(1, max(size, max(state.slot_owner, default=0)) + 1):
        owner = state.slot_owner.get(s)
        if owner is None:
            out[s] = FREE_OWNER
        elif owner == TREE:
            out[s] = LOCKED if s in locked else EVICTABLE
        else:
            out[s] = owner
    return out


def slot_colors(trace: Trace, state: RoundState) -> dict[int, str]:
    colors = rid_colors(trace)
    return {s: KIND_COLOR.get(k) or colors.get(k, "#cccccc") for s, k in slot_kinds(state).items()}


def slot_token_ids(states: list[RoundState]) -> list[dict[int, int]]:
    """For each state: slot -> the token whose K/V it holds, from the batches written so far (the last
    write wins) and, for slots in the tree, from the tree itself."""
    written: dict[int, int] = {}
    out = []
    for state in states:
        for row in state.batch.forward_rows if state.batch else []:
            if row.slot is not None and row.input_id is not None:
                written[row.slot] = row.input_id
        out.append({**written, **slot_tokens(state.tree)})
    return out


def _cell(slot: int, color: str, tid: int | None, texts: dict[int, str]) -> str:
    under = "" if tid is None else html_text(quoted(cut(texts[tid], 6)) if tid in texts else str(tid))
    return (f'<TD PORT="s{slot}" BGCOLOR="{color}"><FONT COLOR="#555555">{slot}</FONT>'
            f"<BR/>{under or ' '}</TD>")


def _html(trace: Trace, state: RoundState, tokens: dict[int, int]) -> Html:
    texts = token_texts(trace)
    kinds = slot_kinds(state)
    colors = slot_colors(trace, state)
    slots = sorted(kinds)
    head = f"KV pool at the end of round {state.round}: {len(slots)} slots, " \
           f"{sum(1 for k in kinds.values() if k == FREE_OWNER)} free"
    rows = [f'<TR><TD COLSPAN="{COLUMNS}"><B>{html_text(head)}</B></TD></TR>']
    free_run: list[int] = []

    def flush_free() -> None:
        if free_run:
            free = html_text(f"slots {free_run[0]}–{free_run[-1]}: free")
            rows.append(f'<TR><TD COLSPAN="{COLUMNS}" BGCOLOR="{FREE}">{free}</TD></TR>')
            free_run.clear()

    for start in range(0, len(slots), COLUMNS):
        line = slots[start: start + COLUMNS]
        if all(kinds[s] == FREE_OWNER for s in line):
            free_run += line
            continue
        flush_free()
        cells = [_cell(s, colors[s], tokens.get(s) if kinds[s] != FREE_OWNER else None, texts) for s in line]
        cells += ['<TD BORDER="0"></TD>'] * (COLUMNS - len(line))  # past the pool's last slot
        rows.append("<TR>" + "".join(cells) + "</TR>")
    flush_free()
    rows += _legend(trace, kinds)
    # a row per line: Graphviz ignores the line breaks between rows, and a golden file's diff stays readable
    return Html('<TABLE BORDER="0" CELLBORDER="1" CELLSPACING="0" CELLPADDING="3">\n' + "\n".join(rows)
                + "\n</TABLE>")


def _legend(trace: Trace, kinds: dict[int, str]) -> list[str]:
    counts: dict[str, int] = {}
    for k in kinds.values():
        counts[k] = counts.get(k, 0) + 1
    colors = rid_colors(trace)
    entries = [(colors[r], f"request {short_rid(r)}", counts[r]) for r in trace.rids() if r in counts]
    entries += [(KIND_COLOR[k], KIND_TEXT[k], counts.get(k, 0))
                for k in (LOCKED, EVICTABLE, UNASSIGNED, FREE_OWNER)]
    return [f'<TR><TD COLSPAN="2" BGCOLOR="{color}"> </TD><TD COLSPAN="{COLUMNS - 2}" ALIGN="LEFT">'
            f"{html_text(f'{text}: {n} slot' + ('s' if n != 1 else ''))}</TD></TR>"
            for color, text, n in entries]


def kv_graph(trace: Trace, states: list[RoundState], all_rounds: bool) -> Graph:
    """states: every round up to the one drawn (the slots' tokens come from their batches)."""
    g = Graph("kv", attrs={"labelloc": "t", "fontname": "Helvetica"},
              node_defaults={"shape": "plaintext", "fontname": "Helvetica", "fontsize": "10"})
    g.label = ("KV pool slots, coloured by who holds them;\nunder each slot number, the token whose K/V it "
               "holds:\n'its text' where the trace has it, else its id")
    tokens = slot_token_ids(states)
    shown = range(len(states)) if all_rounds else [len(states) - 1]
    g.nodes = [Node(f"pool{states[i].round}", _html(trace, states[i], tokens[i])) for i in shown]
    g.edges = [Edge(a.id, b.id, {"style": "invis"}) for a, b in zip(g.nodes, g.nodes[1:])]
    return g
