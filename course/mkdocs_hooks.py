"""mkdocs hooks (mkdocs.yml names this file's twin, lessons/hooks.py): before each build, run the
scenarios the pages need (cached) and draw their figures; then fill in each page's placeholders."""

from __future__ import annotations

import re
from pathlib import Path

from mkdocs.exceptions import PluginError

from course.build import Course, page_lang
from course.cjk import space_html
from course.facts import FactError
from course.placeholders import PlaceholderError
from tracer.diagrams import GraphvizMissing
from tracer.reader import TraceError

_course: Course | None = None


def _get() -> Course:
    global _course
    if _course is None:
        _course = Course()
    return _course


def on_pre_build(config) -> None:
    try:
        _get().prepare(Path(config["docs_dir"]))
    except (PlaceholderError, FactError, TraceError, GraphvizMissing) as e:
        raise PluginError(f"course: {e}") from None


def on_page_markdown(markdown: str, page, config, files) -> str:
    try:
        return _get().page(markdown, page.file.src_uri)
    except (PlaceholderError, FactError) as e:
        raise PluginError(f"course: {page.file.src_uri}: {e}") from None


def on_page_content(html: str, page, config, files) -> str:
    """A lesson page links the glossary terms it uses; a Chinese page is spaced between Chinese and Latin
    letters or digits (pangu, course/cjk.py), its table of contents too."""
    from mkdocs.utils import get_relative_url

    from course.glossary import link_terms

    src, lang = page.file.src_uri, page_lang(page.file.src_uri)
    if src.startswith("lessons/"):
        glossary = ("zh/" if lang == "zh" else "") + "glossary/"
        html = link_terms(html, lang, get_relative_url(glossary, page.url))
    if lang == "zh":
        html = space_html(html)
        items = list(page.toc or [])
        while items:
            item = items.pop()
            item.title = space_html(item.title)
            items += item.children
    return html


def on_shutdown() -> None:
    if _course is not None:
        _course.traces.close()


_HEAD_ALTERNATE = re.compile(r'\s*<link rel="alternate" href="[^"]*" hreflang="[^"]*">')


def on_post_page(output: str, page, config) -> str:
    """Drop the theme's <head> alternate links: the i18n plugin points them at this page in the other
    language, where the theme then looks for a sitemap.xml that is not there (a 404 in every page's
    console). The language menu keeps its links to the same page in the other language."""
    head, sep, body = output.partition("</head>")
    return _HEAD_ALTERNATE.sub("", head) + sep + body if sep else output
