"""Chinese paragraphs wrapped over several source lines: a browser turns each line break into a space,
which Chinese text must not have (“我们\n看” shows as “我们 看”). Joins such soft breaks when the text on
either side of the break is Chinese; code blocks, lists, tables, headings and admonition openers stay as
they are. A break between Chinese and a Latin letter or digit keeps its space (“KV 池\n48 个” is
“KV 池 48 个”).

`space_html` then spaces Chinese from Latin letters and digits in the built page with pangu, text node by text
node (code, preformatted text, scripts and tags are left alone), and across inline tags
(“的<a>ZeroMQ</a>”)."""

from __future__ import annotations

import html
import re

import pangu

CJK = re.compile(r"[\u2e80-\u9fff\u3000-\u303f\uff00-\uffef]")
BLOCK_START = re.compile(r"^(?:[-*+]\s|#|\||>|!!!|\?\?\?|<|\{\{|\d+\.\s|```|~~~)")
# Markdown that is not shown around the text a line break touches: emphasis, code ticks, link brackets
# and targets, HTML tags
_LEAD = re.compile(r"^(?:[*_`\[~]|<[^>]*>)+")
_TRAIL = re.compile(r"(?:[*_`\]~]|\]\([^)]*\)|<[^>]*>)+$")


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
            out[-1] = prev.rstrip() + _joint(prev_stripped, stripped) + stripped
        else:
            out.append(line)
    return "\n".join(out)



def _joint(before: str, after: str) -> str:
    """What a joined soft break leaves: nothing between two Chinese characters, else the space a browser
    shows (between Chinese and a Latin letter or digit, as pangu spaces them)."""
    a, b = _TRAIL.sub("", before)[-1:], _LEAD.sub("", after)[:1]
    if not a or not b or CJK.match(a) and CJK.match(b):
        return ""
    return " " if pangu.space_text(a + b) != a + b else ""


# -- the built page ------------------------------------------------------------------------------------
TAG = re.compile(r"<!--.*?-->|<(/?)([a-zA-Z][\w-]*)[^>]*?(/?)>", re.S)
OPAQUE = {"code", "pre", "script", "style", "svg", "kbd", "samp", "textarea", "math"}  # text left as it is
INLINE = {"a", "abbr", "b", "code", "del", "em", "i", "ins", "kbd", "mark", "q", "s", "samp", "small", "span",
          "strong", "sub", "sup", "u"}


def tokens(page: str) -> list[list]:
    """[kind, text, depth] pieces of an HTML page: kind 'tag' or 'text'; depth counts the opaque elements
    (code, pre, ...) the piece sits in."""
    out: list[list] = []
    pos, opaque = 0, []
    for m in TAG.finditer(page):
        if m.start() > pos:
            out.append(["text", page[pos:m.start()], len(opaque)])
        closing, name = m.group(1), (m.group(2) or "").lower()
        if name in OPAQUE and not m.group(3):
            if closing and name in opaque:
                del opaque[len(opaque) - 1 - opaque[::-1].index(name):]
            elif not closing:
                opaque.append(name)
        out.append(["tag", m.group(0), len(opaque), name, bool(closing)])
        pos = m.end()
    if pos < len(page):
        out.append(["text", page[pos:], len(opaque)])
    return out


def _spaced(text: str) -> str:
    plain = html.unescape(text)
    spaced = pangu.space_text(plain)
    return text if spaced == plain else html.escape(spaced, quote=False)


def space_html(page: str) -> str:
    """Chinese spaced from Latin letters and digits in an HTML fragment, with pangu: inside each text node,
    then across inline tags (the space goes outside the tag: “见 <code>x</code> 中” , “<a>x</a> 中”)."""
    toks = tokens(page)
    last, between = None, []  # the latest text piece of this run of inline content, and the tags since
    for i, t in enumerate(toks):
        if t[0] == "tag":
            if t[3] and t[3] not in INLINE:  # a block starts or ends: nothing to space across
                last, between = None, []
            else:
                between.append(t)
            continue
        inline_code = t[2] == 1 and toks[i - 1][0] == "tag" and toks[i - 1][3] == "code"
        if t[1].isspace() or t[2] and not inline_code:
            last, between = None, []
            continue
        if not t[2]:
            t[1] = _spaced(t[1])
        if last is not None and between:
            _space_between(toks, last, i, between)
        last, between = i, []
    return "".join(t[1] for t in toks)


def _space_between(toks: list[list], j: int, k: int, between: list) -> None:
    """The pieces j and k are separated by inline tags only: a space between them where pangu puts one."""
    a, b = html.unescape(toks[j][1])[-1:], html.unescape(toks[k][1])[:1]
    if a.isspace() or b.isspace() or pangu.space_text(a + b) == a + b:
        return
    closes_first = between[0][4]  # `x</a>中`: the space goes after the closing tag, outside the link
    for n in ((k, j) if closes_first else (j, k)):
        if toks[n][2] == 0:
            toks[n][1] = " " + toks[n][1] if n == k else toks[n][1] + " "
            return
