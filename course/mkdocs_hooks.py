"""mkdocs hooks (lessons/mkdocs.yml names this file's twin, lessons/hooks.py): before each build, run the
scenarios the pages need (cached) and draw their figures; then fill in each page's placeholders."""

from __future__ import annotations

import re
from pathlib import Path

from mkdocs.exceptions import PluginError

from course.build import Course
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
