"""Token text and request colours, shared by the views so a request looks the same in every picture.

Token text comes from the trace only (the tracer loads no tokenizer): `sched.sampled` carries the text
of each sampled token and `tm.tokenized` (level 2) the text of each prompt token. A token the trace
has no text for (an older or level-1 trace) is shown by id.
"""

from __future__ import annotations

import colorsys

from tracer.reader import Trace
from tracer.schema import SCHED_SAMPLED, TM_TOKENIZED

# pastel fills, light enough for black text; requests take them in order of first appearance
PALETTE = ("#8dd3c7", "#ffffb3", "#bebada", "#fb8072", "#80b1d3", "#fdb462", "#b3de69", "#fccde5",
           "#bc80bd", "#ccebc5", "#ffed6f")
TREE_LOCKED = "#bdbdbd"  # in the radix tree and locked by a running request's prefix
TREE_EVICTABLE = "#e6e6e6"  # in the radix tree, referenced by no request: cached, evictable
ALLOCATED = "#fff2cc"  # taken by kv.alloc, not yet assigned to a request
FREE = "#ffffff"


def token_texts(trace: Trace) -> dict[int, str]:
    """Token id -> its text, for every token the trace shows decoded (sampled and, at level 2, prompt)."""
    cache_key = "diagrams.token_texts"
    if cache_key in getattr(trace, "cache", {}):
        return trace.cache[cache_key]
    texts: dict[int, str] = {}
    for ev in trace.events:
        if ev.name == SCHED_SAMPLED:
            pairs = zip(ev.get("token_ids") or [], ev.get("texts") or [])
        elif ev.name == TM_TOKENIZED:
            pairs = zip(ev.get("input_ids") or [], ev.get("input_texts") or [])
        else:
            continue
        for tid, text in pairs:
            if isinstance(tid, int) and isinstance(text, str):
                texts.setdefault(tid, text)
    if hasattr(trace, "cache"):
        trace.cache[cache_key] = texts
    return texts


def quoted(text: str) -> str:
    """Text shown with its edges visible: ' Beijing' keeps its leading space, '\\n' stays one line."""
    return repr(text)


def token(tid: int | None, texts: dict[int, str]) -> str:
    """`40 ' one'` when the text is known, else `40`."""
    if tid is None:
        return "?"
    return f"{tid} {quoted(texts[tid])}" if tid in texts else str(tid)


def token_ids(ids: list[int], limit: int = 8) -> str:
    """Token ids, the first `limit` of them and a count of the rest."""
    shown = " ".join(map(str, ids[:limit]))
    return shown + (f" … +{len(ids) - limit}" if len(ids) > limit else "")


def joined_text(ids: list[int], texts: dict[int, str]) -> str | None:
    """The text of a run of tokens, when every one of them is known."""
    if not ids or any(t not in texts for t in ids):
        return None
    return "".join(texts[t] for t in ids)


def cut(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def rid_colors(trace: Trace) -> dict[str, str]:
    """A fill colour per request, in order of first appearance; past the palette, evenly spaced hues."""
    colors = {}
    for i, rid in enumerate(trace.rids()):
        if i < len(PALETTE):
            colors[rid] = PALETTE[i]
        else:
            r, g, b = colorsys.hsv_to_rgb(((i - len(PALETTE)) * 0.618034) % 1.0, 0.35, 0.95)
            colors[rid] = f"#{round(r * 255):02x}{round(g * 255):02x}{round(b * 255):02x}"
    return colors
