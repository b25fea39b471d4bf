"""Small text formatters shared by `show` and the exporters, so numbers read the same everywhere."""

from __future__ import annotations

from typing import Any


def ranges(xs: list[int] | None) -> str:
    """[1, 2, 3, 7, 9, 10] -> "1-3,7,9-10": KV slots are mostly runs, and runs are short to print."""
    if not xs:
        return "-"
    parts, start, prev = [], xs[0], xs[0]
    for x in list(xs[1:]) + [None]:
        if x is not None and x == prev + 1:
            prev = x
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if x is not None:
            start = prev = x
    return ",".join(parts)


def short_rid(rid: str | None, width: int = 10) -> str:
    """Engine rids are 32 hex digits; the first 8 are enough to tell a trace's requests apart."""
    if rid is None:
        return "-"
    return rid if len(rid) <= width else rid[:8] + "…"


def ms(ns: float | None, digits: int = 1) -> str:
    return "-" if ns is None else f"{ns / 1e6:.{digits}f}"


def compact(value: Any, limit: int = 40) -> str:
    """One attribute value on one short line: int lists as ranges, long text cut with an ellipsis."""
    ints = isinstance(value, list) and value and all(type(v) is int for v in value)
    if ints:
        text = ranges(value) if len(value) > 2 and value == sorted(value) else str(value)
    elif isinstance(value, str):
        text = value if value.isidentifier() else repr(value)  # quote only text with spaces or symbols
    else:
        text = str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def finish_type(reason: Any) -> str:
    """finish_reason as one word: stop, length, abort."""
    if isinstance(reason, dict):
        return str(reason.get("type", "?"))
    return "-" if reason is None else str(reason)
