"""The built site's Chinese pages: no Chinese glued to a Latin letter or digit outside code, and every lesson
page, in both languages, links the glossary terms it uses."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

from course.cjk import tokens
from course.terms import GLOSSARY

pytestmark = pytest.mark.slow

HAN = r"[\u3400-\u4dbf\u4e00-\u9fff]"
JOIN = re.compile(rf"{HAN}[A-Za-z0-9]|[A-Za-z0-9]{HAN}")
BLOCKS = re.compile(r"p|li|td|th|h[1-6]|summary|div|dd|dt|blockquote|br|pre|table|tr|ul|ol|details")


def article(page: str) -> str:
    start = page.find("<article")
    return page[start:page.find("</article>", start)] if start >= 0 else ""


def visible(page: str, *, skip: tuple[str, ...] = ()) -> str:
    """The article's text as a reader sees it: inline tags are invisible, a block ends a line, and code
    (and the elements in `skip`) is cut out with a mark that joins nothing."""
    out, hidden = [], []
    for t in tokens(article(page)):
        if t[0] == "tag":
            name, closing = t[3], t[4]
            if name in skip and not closing:
                hidden.append(name)
            elif name in skip and closing and name in hidden:
                hidden.remove(name)
            out.append("\n" if BLOCKS.fullmatch(name or "-") else "")
        elif t[2] or hidden:
            out.append("|")
        else:
            out.append(html.unescape(t[1]))
    return "".join(out)


def joins(site: Path) -> list[str]:
    """Each place on a built zh page where Chinese touches a Latin letter or digit outside code."""
    found = []
    for page in sorted((site / "zh").rglob("*.html")):
        text = visible(page.read_text(encoding="utf-8"))
        where = page.relative_to(site).parent
        found += [f"{where}: …{text[max(0, m.start() - 8):m.end() + 8]}…".replace("\n", " ")
                  for m in JOIN.finditer(text)]
    return found


def test_the_join_count_counts_joins_outside_code():
    page = "<article><p>KV 池48 个，进程间的<a>ZeroMQ</a>；<code>a中b</code> 第 3 轮</p></article>"
    assert JOIN.findall(visible(page)) == ["池4", "的Z"]


def test_no_chinese_is_glued_to_latin_or_digits(built_site: Path):
    found = joins(built_site)
    assert not found, f"{len(found)} joins:\n" + "\n".join(found[:40])


def _linked(page: str) -> set[str]:
    return set(re.findall(r'href="[^"]*glossary/#([\w-]+)"', article(page)))


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_each_lesson_links_the_glossary_terms_it_uses(built_site: Path, lang: str):
    root = built_site / ("zh" if lang == "zh" else "") / "lessons"
    missing = []
    for page in sorted(root.glob("*/index.html")):
        html = page.read_text(encoding="utf-8")
        text = visible(html, skip=("a", "h1", "h2", "h3", "h4", "summary", "table", "pre"))
        used = {g.anchor for g in GLOSSARY if re.search(g.zh if lang == "zh" else g.en, text)}
        missing += [f"{page.parent.name}: {anchor}" for anchor in sorted(used - _linked(html))]
    assert not missing, "\n".join(missing)


def test_the_figures_of_a_chinese_page_speak_chinese(built_site: Path, course_cache: Path):
    """Each figure of a zh lesson page is drawn in Chinese (its own -zh.svg file, its mermaid text), with the
    trace's own words (token text, names, the engine's messages) left as they are."""
    from course.traces import engine_hash
    from tests.tracer.test_diagram_lang import english_words, mermaid_words, messages
    from tracer.reader import load_trace

    runs = [folder for folder in sorted((course_cache / engine_hash()).iterdir()) if (folder / "DONE").exists()]
    said = sorted({m for folder in runs for m in messages(load_trace(str(folder)))}, key=len, reverse=True)
    left, figures = [], 0
    for page in sorted((built_site / "zh" / "lessons").rglob("index.html")):
        text = page.read_text(encoding="utf-8")
        where = page.relative_to(built_site).parent
        for src in re.findall(r'<img[^>]* src="([^"]+\.svg)"', text):
            assert src.endswith("-zh.svg"), f"{where}: {src} is the English figure"
            svg = (page.parent / src).resolve().read_text(encoding="utf-8")
            words = english_words(" ".join(re.findall(r"<text[^>]*>(.*?)</text>", svg, re.DOTALL)), said)
            left += [f"{where}: {src}: {w}" for w in dict.fromkeys(words)]
            figures += 1
        for block in re.findall(r'<pre class="mermaid"><code>(.*?)</code></pre>', text, re.DOTALL):
            words = english_words(mermaid_words(html.unescape(block)), said)
            left += [f"{where}: mermaid: {w}" for w in dict.fromkeys(words)]
            figures += 1
    assert figures > 20, f"only {figures} figures on the zh lesson pages"
    assert not left, "English words in the figures of Chinese pages:\n" + "\n".join(left)
