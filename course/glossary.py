"""The glossary's terms linked from a lesson page: the first use of each term (course/terms.py GLOSSARY) in
the page's text becomes a link to its entry on the glossary page of the same language. Headings, links,
admonition titles, tables and code blocks are left alone; an inline code span that is exactly the term
(`lock_ref`) is linked whole."""

from __future__ import annotations

import html
import re

from course.cjk import tokens
from course.terms import GLOSSARY

KEEP_OUT = {"a", "h1", "h2", "h3", "h4", "h5", "h6", "summary", "table", "pre", "script", "style", "svg",
            "figcaption", "button", "label", "title"}


def _link(href: str, anchor: str, inner: str) -> str:
    return f'<a class="glossary" href="{html.escape(href)}#{anchor}">{inner}</a>'


def link_terms(page: str, lang: str, glossary: str) -> str:
    """`glossary`: the glossary page's URL relative to this page (`../../glossary/`)."""
    patterns = {g.anchor: re.compile(g.zh if lang == "zh" else g.en) for g in GLOSSARY}
    toks = tokens(page)
    outside: list[str] = []
    for i, t in enumerate(toks):
        if t[0] == "tag":
            name, closing = t[3], t[4]
            if name in KEEP_OUT and not t[1].endswith("/>"):
                if not closing:
                    outside.append(name)
                elif name in outside:
                    del outside[len(outside) - 1 - outside[::-1].index(name):]
            continue
        if outside or not patterns:
            continue
        if t[2] == 1 and toks[i - 1][0] == "tag" and toks[i - 1][3] == "code" and i + 1 < len(toks):
            code = html.unescape(t[1])
            for anchor, pattern in patterns.items():
                if pattern.fullmatch(code):
                    toks[i - 1][1] = _link(glossary, anchor, "")[: -len("</a>")] + toks[i - 1][1]
                    toks[i + 1][1] += "</a>"
                    del patterns[anchor]
                    break
            continue
        if t[2] == 0:
            t[1] = _link_text(t[1], patterns, glossary)
    return "".join(t[1] for t in toks)


def _link_text(text: str, patterns: dict[str, re.Pattern], glossary: str) -> str:
    out, pos = [], 0
    while True:
        hits = [(m.start(), -len(m.group(0)), anchor, m) for anchor, p in patterns.items()
                if (m := p.search(text, pos))]
        if not hits:
            break
        _, _, anchor, m = min(hits)
        out += [text[pos:m.start()], _link(glossary, anchor, m.group(0))]
        pos = m.end()
        del patterns[anchor]
    return "".join(out) + text[pos:]
