"""Chinese paragraphs wrapped over several source lines: a browser turns each line break into a space,
which Chinese text must not have (“我们\n看” shows as “我们 看”). Joins such soft breaks when the text on
either side of the break is Chinese; code blocks, lists, tables, headings and admonition openers stay as
they are."""

from __future__ import annotations

import re

CJK = re.compile(r"[\u2e80-\u9fff\u3000-\u303f\uff00-\uffef]")
BLOCK_START = re.compile(r"^(?:[-*+]\s|#|\||>|!!!|\?\?\?|<|\{\{|\d+\.\s|```|~~~)")


def _starts_block(stripped: str) -> bool:
    return bool(BLOCK_START.match(stripped))


def join_soft_breaks(markdown: str) -> str:
    out: list[str] = []
    fenced = False
    for line in markdown.split("\n"):
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            fenced = not fenced
            out.append(line)
            continue
        if fenced or not out or not stripped or _starts_block(stripped):
            out.append(line)
            continue
        prev = out[-1]
        prev_stripped = prev.strip()
        joinable = (prev_stripped and not prev_stripped.startswith(("#", "|", "!!!", "???", "```", "~~~"))
                    and not prev.endswith("  ")  # a hard break stays
                    and (CJK.match(prev_stripped[-1]) or CJK.match(stripped[0])))
        if joinable:
            out[-1] = prev.rstrip() + stripped
        else:
            out.append(line)
    return "\n".join(out)

