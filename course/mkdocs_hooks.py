"""mkdocs hooks (lessons/mkdocs.yml names this file's twin, lessons/hooks.py): before each build, run the
scenarios the pages need (cached) and draw their figures; then fill in each page's placeholders."""

from __future__ import annotations

from pathlib import Path

from mkdocs.exceptions import PluginError

from course.build import Course
from course.facts import FactError
from course.placeholders import PlaceholderError

_course: Course | None = None


def _get() -> Course:
    global _course
    if _course is None:
        _course = Course()
    return _course


def on_pre_build(config) -> None:
    try:
        _get().prepare(Path(config["docs_dir"]))
    except (PlaceholderError, FactError) as e:
        raise PluginError(f"course: {e}") from None


def on_page_markdown(markdown: str, page, config, files) -> str:
    try:
        return _get().page(markdown, page.file.src_uri)
    except (PlaceholderError, FactError) as e:
        raise PluginError(f"course: {page.file.src_uri}: {e}") from None


def on_shutdown() -> None:
    if _course is not None:
        _course.traces.close()
