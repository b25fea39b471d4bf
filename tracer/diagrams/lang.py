"""The language of a diagram's words: English as the views write them, or Chinese for the zh lesson pages.

A view writes its labels in English; while `language("zh")` is active, the places where label text is
printed (`html_text`, a DOT label, a Mermaid label, a lifecycle line before it is wrapped) pass it through
`tr`, which rewrites the view's phrases with the table in `zh.py`. What comes from the trace is never
touched: token text (quoted, as `quoted` prints it), rids, numbers, and the engine's names (`ReqState`,
`rem_total_tokens`, `waiting_queue`), which the Chinese pages keep in English too.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterator

LANGS = ("en", "zh")
_LANG: ContextVar[str] = ContextVar("diagram_lang", default="en")
# token text as `quoted` prints it (Python's repr of a str): kept out of the translation
_TIMES = re.compile(r"(.*?)( ×\d+)?", re.DOTALL)
_QUOTED = re.compile(r"""'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*\"""")


@contextmanager
def language(lang: str) -> Iterator[None]:
    """Draw in `lang` ("en" or "zh") inside the block."""
    if lang not in LANGS:
        raise ValueError(f"unknown diagram language {lang!r}: expected one of {', '.join(LANGS)}")
    token = _LANG.set(lang)
    try:
        yield
    finally:
        _LANG.reset(token)


def current() -> str:
    return _LANG.get()


def tr(text: str) -> str:
    """`text` in the current language (unchanged in English)."""
    if _LANG.get() == "en" or not text:
        return text
    from tracer.diagrams.zh import PHRASES

    return translate(text, PHRASES)


def translate(text: str, phrases: list[tuple[re.Pattern, str]]) -> str:
    """Line by line, each phrase's pattern replaced in turn, outside quoted token text; a line's count of
    repeats (" ×2", as merge_repeats writes it) is kept aside, so a phrase matches with or without one."""
    kept: list[str] = []

    def keep(m: re.Match) -> str:
        kept.append(m.group(0))
        return f"\x00{len(kept) - 1}\x00"

    lines = []
    for line in _QUOTED.sub(keep, text).split("\n"):
        line, times = _TIMES.fullmatch(line).groups()
        for pattern, repl in phrases:
            line = pattern.sub(repl, line)
        lines.append(line + (times or ""))
    return re.sub("\x00(\\d+)\x00", lambda m: kept[int(m.group(1))], "\n".join(lines))
