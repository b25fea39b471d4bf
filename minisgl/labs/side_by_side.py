"""The round where a learner's trace diverges, drawn twice, expected beside got, with every label that
differs between the two drawings in red.

The view follows the event: admission events draw the admission view, cache events the radix tree, KV
events the KV pool, anything else the round's batch; an event of no round (HTTP, TokenizerManager) draws its
request's lifecycle. Both drawings come from the tracer's own diagram views
(Graphviz), so they read exactly like the lesson's figures.
"""

from __future__ import annotations

import html
import re
from difflib import SequenceMatcher
from pathlib import Path

from tracer.diagrams import render_diagram
from tracer.reader import Trace, TraceError

RED = "#d00000"
TEXT = re.compile(r"<text\b([^>]*)>(.*?)</text>", re.S)
SIZE = re.compile(r'<svg\b[^>]*?width="([\d.]+)pt"[^>]*?height="([\d.]+)pt"', re.S)


def view_for(event: str) -> str:
    if event.startswith("sched.admission") or event in ("sched.prefill_budget", "sched.prefix_matched"):
        return "admission"
    if event.startswith("cache."):
        return "radix"
    if event.startswith("kv."):
        return "kv"
    return "round"


def _draw(trace: Trace, view: str, round: int | None, rid: str | None = None) -> str:
    """The view as SVG text; "" when the trace cannot draw it. A round view that cannot draw this round (no
    admission in it, ...) falls back to the round's batch; a lifecycle (an event of no round: HTTP,
    TokenizerManager) draws the request's whole journey."""
    if view != "lifecycle" and round not in trace.rounds():
        return ""
    try:
        out = render_diagram(trace, view, "svg", rid=rid if view == "lifecycle" else None,
                             round=None if view == "lifecycle" else round)
    except TraceError:
        return "" if view in ("round", "lifecycle") else _draw(trace, "round", round)
    return out.decode() if isinstance(out, bytes) else out


def _body(svg: str) -> tuple[str, float, float]:
    """The drawing's <svg> element, sized in the outer drawing's units (Graphviz's points, one to one)."""
    m = SIZE.search(svg)
    w, h = (float(m.group(1)), float(m.group(2))) if m else (400.0, 300.0)
    body = svg[svg.find("<svg"):]
    body = re.sub(r'width="[\d.]+pt" height="[\d.]+pt"', f'width="{w}" height="{h}"', body, count=1)
    return body, w, h


def mark_differences(a: str, b: str, by_position: bool = True) -> tuple[str, str, int]:
    """Colour red the <text>s that differ: by position, the i-th text of each drawing where the two differ;
    else (a lifecycle, whose layout shifts when one node changes) the texts outside their longest common
    run."""
    ta, tb = TEXT.findall(a), TEXT.findall(b)
    if by_position:
        differ = {i for i in range(max(len(ta), len(tb)))
                  if i >= len(ta) or i >= len(tb) or ta[i][1] != tb[i][1]}
        differ_a = differ_b = differ
    else:
        differ_a, differ_b = _unmatched(ta, tb)
        differ = differ_a | differ_b

    def paint(svg: str, differ: set[int]) -> str:
        count = -1

        def one(m: re.Match) -> str:
            nonlocal count
            count += 1
            if count not in differ:
                return m.group(0)
            attrs = re.sub(r'\s(?:fill|font-weight)="[^"]*"', "", m.group(1))
            return f'<text{attrs} fill="{RED}" font-weight="bold">{m.group(2)}</text>'

        return TEXT.sub(one, svg)

    return paint(a, differ_a), paint(b, differ_b), len(differ)


def _unmatched(ta: list[tuple[str, str]], tb: list[tuple[str, str]]) -> tuple[set[int], set[int]]:
    """The texts of each drawing outside the longest common run of texts of the two, in drawing order."""
    ops = SequenceMatcher(None, [t for _, t in ta], [t for _, t in tb], autojunk=False).get_opcodes()
    a = {i for tag, i1, i2, _, _ in ops if tag != "equal" for i in range(i1, i2)}
    b = {j for tag, _, _, j1, j2 in ops if tag != "equal" for j in range(j1, j2)}
    return a, b


def write_side_by_side(expected: Trace, got: Trace, event: str, round: int | None, summary: str, path: Path,
                       rid: str | None = None, view: str = "") -> Path:
    """Draw `round` in `view` (the lab's component's own view; by default the one that fits the event); with
    no round (an HTTP or TokenizerManager event), the lifecycle of request `rid`."""
    view = (view or view_for(event)) if round is not None else "lifecycle"
    a, b = _draw(expected, view, round, rid), _draw(got, view, round, rid)
    # a tree or a lifecycle shifts when one node is missing: its texts are matched by their longest common run
    a, b, _ = mark_differences(a, b, by_position=view not in ("lifecycle", "radix"))
    parts, x, height = [], 0.0, 0.0
    for title, svg in (("expected (the engine's own component)", a), ("got (your component)", b)):
        if svg:
            body, w, h = _body(svg)
        else:
            body, w, h = "", 360.0, 40.0
        parts.append(f'<text x="{x + 8}" y="22" font-family="sans-serif" font-size="16" font-weight="bold">'
                     f'{html.escape(title)}</text>')
        if body:
            parts.append(re.sub(r"^<svg\b", f'<svg x="{x}" y="34"', body, count=1))
        else:
            parts.append(f'<text x="{x + 8}" y="60" font-family="sans-serif" font-size="13">'
                         f'({"no round " + str(round) if round is not None else "no request " + str(rid)} '
                         f'in this trace)</text>')
        x += w + 24
        height = max(height, h)
    note = (f'<text x="8" y="{height + 60}" font-family="monospace" font-size="13">'
            f"{html.escape(summary)}</text>")
    out = (f'<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" '
           f'width="{x:.0f}pt" height="{height + 76:.0f}pt" viewBox="0 0 {x:.0f} {height + 76:.0f}">\n'
           f'<rect width="100%" height="100%" fill="white"/>\n' + "\n".join(parts) + "\n" + note
           + "\n</svg>\n")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(out, encoding="utf-8")
    return path
