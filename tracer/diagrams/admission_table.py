"""The admission view: one round's PrefillAdder as a table — the budgets it started with, then each candidate
in the order considered with its needs, every budget before → after and the decision, the budget that
refused it (or cut its chunk) filled in colour; then the requests it never looked at. Mermaid draws the
same as a flowchart of candidate → decision nodes, since Mermaid has no table."""

from __future__ import annotations

import json

from tracer.admission import (
    AdderPass,
    Candidate,
    RoundAdmission,
    Skipped,
    cell,
    num,
    reserved_formula,
    start_lines,
)
from tracer.check_admission import BUDGETS
from tracer.diagrams.dot import html_text, visible
from tracer.diagrams.graph import Edge, Graph, Html, Node
from tracer.diagrams.lang import tr
from tracer.diagrams.text import rid_colors
from tracer.fmt import short_rid
from tracer.reader import Trace

COLUMNS = ("#", "request", "source", "extend", "future", "locked", *BUDGETS, "decision")
# drawn as two tables, so that each fits a lesson's column: the candidates and their decisions, then the
# budgets transposed (a row per budget, spent down candidate by candidate from left to right)
CANDIDATE_COLUMNS = (*COLUMNS[:6], COLUMNS[-1])
# the deciding cell is filled and framed, so it stands out from the request colours too
REFUSED_ROW, REFUSED_CELL, REFUSED_LINE = "#fee5d9", "#fc9272", "#cb181d"
CHUNKED_ROW, CHUNKED_CELL, CHUNKED_LINE = "#fff5eb", "#fdae6b", "#d94801"
ADMITTED = "#e5f5e0"
TITLE = ("Admission: the PrefillAdder's candidates in the order considered,\n"
         "then its budgets, candidate by candidate (each budget before → after).\n"
         "Red: refused, the budget that refused it filled;\n"
         "orange: chunked, the budget that cut the chunk filled")


def _td(text: str, bg: str | None = None, bold: bool = False, span: int = 1, left: bool = False,
        frame: str | None = None, wrap: str | None = None) -> str:
    """wrap: a line break at the first `wrap` in the text, after its last space (the text reads the same); in
    Chinese, after a full-width colon or before a full-width parenthesis."""
    text = tr(text)
    if wrap and wrap not in text:
        wrap = {": ": "：", " (": "（"}.get(wrap, wrap)
    attrs = (f' COLSPAN="{span}"' if span > 1 else "") + (f' BGCOLOR="{bg}"' if bg else "") + (
        ' ALIGN="LEFT" BALIGN="LEFT"' if left else "") + (f' BORDER="2" COLOR="{frame}"' if frame else "")
    at = text.find(wrap) + (wrap.rfind(" ") + 1 if " " in wrap else len(wrap) if wrap == "：" else 0) \
        if wrap and wrap in text else 0
    body = html_text(text[:at]) + "<BR/>" + html_text(text[at:]) if 0 < at < len(text) else html_text(text)
    body = body or " "
    return f"<TD{attrs}>{f'<B>{body}</B>' if bold else body}</TD>"


def _row(cells: list[str]) -> str:
    return "<TR>" + "".join(cells) + "</TR>"


def candidate_cells(c: Candidate) -> list[str]:
    """The row's text, column by column (what a test or a reader compares)."""
    reserved = c.source == "waiting_queue" and c.decision != "chunked"  # only a whole admission reserves them
    future = str(c.future_tokens) if reserved else f"{c.future_tokens} (not reserved)"
    return [c.rid, c.source, str(c.extend_input_len), future, str(c.prefix_locked),
            *(cell(c, b) for b in BUDGETS), c.why]


def _row_bg(c: Candidate) -> str | None:
    return {"refused": REFUSED_ROW, "chunked": CHUNKED_ROW}.get(c.decision)


def _candidate(k: int, c: Candidate, colors: dict[str, str], rid: str | None) -> str:
    row_bg, texts = _row_bg(c), candidate_cells(c)
    tds = [_td(str(k), row_bg), _td(short_rid(texts[0]), colors.get(c.rid, row_bg), bold=c.rid == rid)]
    tds += [_td(t, row_bg, wrap=" ") if i == 3 else _td(t, row_bg) for i, t in enumerate(texts[1:5], start=1)]
    tds.append(_td(texts[10], row_bg or ADMITTED, bold=c.decision == "refused", left=True, wrap=": "))
    return _row(tds)


def _budgets(p: AdderPass, colors: dict[str, str], rid: str | None) -> Html:
    """The budgets transposed: a row per budget, a column per candidate; the deciding cell filled."""
    head = [_td(f"{k} · {short_rid(c.rid)}", colors.get(c.rid), bold=c.rid == rid)
            for k, c in enumerate(p.candidates, start=1)]
    rows = [_row([_td("budget", bold=True), *head])]
    hits = {"refused": (REFUSED_CELL, REFUSED_LINE), "chunked": (CHUNKED_CELL, CHUNKED_LINE)}
    for b in BUDGETS:
        tds = [_td(b, bold=True, left=True)]
        for c in p.candidates:
            hit, line = hits.get(c.decision, (None, None))
            text = cell(c, b)
            tds.append(_td(text, hit, bold=True, frame=line) if b == c.deciding else _td(text, _row_bg(c)))
        rows.append(_row(tds))
    return _table(rows)


def _pass(trace: Trace, p: AdderPass, head: str, rid: str | None) -> Html:
    width = len(CANDIDATE_COLUMNS)
    rows = [_row([_td(head, bold=True, span=width)])]
    if p.start is not None:
        rows.append(_row([_td("starting budgets", bold=True, span=width, left=True)]))
        for name, how in start_lines(p.start):
            rows.append(_row([_td(name, span=3, left=True), _td(how, span=width - 3, left=True)]))
        running = ", ".join(short_rid(r) for r in p.start.running_rids) or "none"
        rows.append(_row([_td(f"running: {running}", span=3, left=True),
                          _td(reserved_formula(p.start), span=width - 3, left=True)]))
    rows.append(_row([_td(c, bold=True) for c in CANDIDATE_COLUMNS]))
    colors = rid_colors(trace)
    rows += [_candidate(k, c, colors, rid) for k, c in enumerate(p.candidates, start=1)]
    if p.not_considered:
        last = p.candidates[-1] if p.candidates else None
        why = f" (the round stopped at {short_rid(p.stopped_by)}: {last.why})" if last else ""
        rows.append(_row([_td("never considered: " + ", ".join(short_rid(r) for r in p.not_considered) + why,
                              span=width, left=True, wrap=" (")]))
    if not p.candidates:
        rows.append(_row([_td("no candidate", span=width)]))
    return _table(rows)


def _skipped(n: int, s: Skipped) -> Html:
    head = ("reason", "num_running", "max_running_requests", "waiting")
    return _table([_row([_td(f"round {n}: no PrefillAdder ran (get_new_batch_prefill returned early)",
                             bold=True, span=len(head))]),
                   _row([_td(h, bold=True) for h in head]),
                   _row([_td(s.reason, REFUSED_CELL, bold=True, frame=REFUSED_LINE), _td(str(s.num_running)),
                         _td(str(s.max_running_requests)), _td(", ".join(short_rid(r) for r in s.waiting))])])


def _table(rows: list[str]) -> Html:
    # a row per line: Graphviz ignores the line breaks between rows, and a golden file's diff stays readable
    return Html('<TABLE BORDER="0" CELLBORDER="1" CELLSPACING="0" CELLPADDING="3">\n' + "\n".join(rows)
                + "\n</TABLE>")


def round_nodes(trace: Trace, adm: RoundAdmission, rid: str | None) -> list[Node]:
    """A table per PrefillAdder of the round and one per skipped prefill; a note when it had neither."""
    n, out = adm.round, []
    for i, p in enumerate(adm.passes, start=1):
        head = f"round {n} · PrefillAdder" + (f" {i} of {len(adm.passes)}" if len(adm.passes) > 1 else "")
        if len(adm.passes) > 1 and i < len(adm.passes):
            head += " (admitted nobody: no batch ran, the scheduler tried again)"
        name = f"round{n}" + (f"_{i}" if i > 1 else "")
        out.append(Node(name, _pass(trace, p, head, rid)))
        if p.candidates:
            out.append(Node(f"{name}_budgets", _budgets(p, rid_colors(trace), rid)))
    out += [Node(f"round{n}_skipped" + (f"_{i}" if i > 1 else ""), _skipped(n, s))
            for i, s in enumerate(adm.skipped, start=1)]
    if not out:
        out.append(Node(f"round{n}",
                        Html(f"<B>{html_text(f'round {n}: nothing was waiting, no PrefillAdder ran')}"
                                          "</B>")))
    return out


def admission_graph(trace: Trace, rounds: list[RoundAdmission], rid: str | None) -> Graph:
    g = Graph("admission", attrs={"labelloc": "t", "fontname": "Helvetica", "ranksep": "0.2"},
              node_defaults={"shape": "plaintext", "fontname": "Helvetica", "fontsize": "10"})
    g.label = TITLE + (f"\n(request {short_rid(rid)} in bold)" if rid is not None else "")
    g.nodes = [node for adm in rounds for node in round_nodes(trace, adm, rid)]
    g.edges = [Edge(a.id, b.id, {"style": "invis"}) for a, b in zip(g.nodes, g.nodes[1:])]
    return g


# ---- Mermaid: candidate -> decision, one chain per PrefillAdder --------------------------------------------
def _m(text: str) -> str:
    from tracer.diagrams.mermaid import escape

    return escape(text)


def _mermaid_pass(n: int, i: int, p: AdderPass, indent: str) -> list[str]:
    pre = f"r{n}" + (f"p{i}" if i > 1 else "")
    out, prev = [], f"{pre}_start"
    lines = [f"round {n}"]
    if p.start is not None:
        lines = [f"round {n} · starting budgets", *(f"{b} {num(p.start.budgets.get(b))}" for b in BUDGETS),
                 reserved_formula(p.start)]
    out.append(f'{indent}{prev}["{"<br/>".join(_m(x) for x in lines)}"]')
    for k, c in enumerate(p.candidates, start=1):
        cand, dec = f"{pre}_c{k}", f"{pre}_d{k}"
        need = f"extend {c.extend_input_len} · future {c.future_tokens} · locked {c.prefix_locked}"
        out.append(f'{indent}{cand}["{_m(c.rid)}<br/>{_m(need)}"]')
        spent = [f"{b} {cell(c, b)}" for b in BUDGETS if "→" in cell(c, b)]
        out.append(f'{indent}{dec}("{"<br/>".join(_m(x) for x in [c.why, *spent])}")')
        out.append(f"{indent}{prev} --> {cand} --> {dec}")
        out.append(f"{indent}class {dec} {c.decision}")
        prev = dec
    if p.not_considered:
        out.append(f'{indent}{pre}_nc["{_m("never considered: " + ", ".join(p.not_considered))}"]')
        out.append(f"{indent}{prev} -.-> {pre}_nc")
    return out


def _mermaid_skipped(n: int, i: int, s: Skipped, indent: str) -> list[str]:
    text = f"{_m(f'round {n}: no PrefillAdder ran')}<br/>{_m(s.reason)}: " \
           f"{_m(f'{s.num_running} running of {s.max_running_requests}')}"
    return [f'{indent}r{n}_skipped{i}["{text}<br/>{_m("waiting: " + ", ".join(s.waiting))}"]',
            f"{indent}class r{n}_skipped{i} refused"]


def admission_mermaid(rounds: list[RoundAdmission]) -> str:
    """One flowchart; with several rounds, a subgraph per round. Classes colour the decisions as the DOT
    view colours its rows."""
    out = []
    if len(rounds) == 1:
        title = tr(f"Admission in round {rounds[0].round}")
        out += ["---", f"title: {json.dumps(visible(title), ensure_ascii=False)}", "---"]
    out += ["flowchart TD", f"    classDef admitted fill:{ADMITTED}",
            f"    classDef chunked fill:{CHUNKED_CELL}", f"    classDef refused fill:{REFUSED_CELL}"]
    for adm in rounds:
        indent = "    "
        if len(rounds) > 1:
            out.append(f'    subgraph r{adm.round}["{_m(f"round {adm.round}")}"]')
            indent = "        "
        for i, p in enumerate(adm.passes, start=1):
            out += _mermaid_pass(adm.round, i, p, indent)
        for i, s in enumerate(adm.skipped, start=1):
            out += _mermaid_skipped(adm.round, i, s, indent)
        if adm.empty:
            out.append(f'{indent}r{adm.round}_none["{_m(f"round {adm.round}: nothing was waiting")}"]')
        if len(rounds) > 1:
            out.append("    end")
    return "\n".join(out) + "\n"
