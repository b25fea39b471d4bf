"""The lesson pages' sources: no hand-typed numbers, both languages, the same figures in each.

These read the Markdown only (no build, no model), so they run in a second; tests/lessons/test_site.py
builds the site and checks every placeholder resolves against real traces.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from course.build import page_slug
from course.facts import page_module
from course.placeholders import PLACEHOLDER, parse

DOCS = Path(__file__).resolve().parents[2] / "lessons" / "docs"
LESSONS = DOCS / "lessons"
EN = sorted(p for p in LESSONS.glob("*.md") if not p.name.endswith(".zh.md"))
ZH = sorted(LESSONS.glob("*.zh.md"))

# a number standing alone: not part of a word such as R1, float32, UTF-8 or h2
NUMBER = re.compile(r"(?<![A-Za-z0-9_\-./:#])\d+(?:[.,]\d+)*(?![A-Za-z0-9_])")  # ASCII: 第2轮 is caught


def hand_typed_numbers(text: str) -> list[str]:
    """Every line that shows a number not produced by a placeholder."""
    found = []
    for lineno, line in enumerate(text.splitlines(), 1):
        bare = PLACEHOLDER.sub(" ", line)
        bare = re.sub(r"\]\([^)]*\)", "]", bare)  # a link's target (file names of other pages)
        if NUMBER.search(bare):
            found.append(f"{lineno}: {line.strip()}")
    return found


def test_there_are_lesson_pages_in_both_languages():
    assert len(EN) >= 12, [p.name for p in EN]
    assert {p.name[: -len(".md")] for p in EN} == {p.name[: -len(".zh.md")] for p in ZH}


@pytest.mark.parametrize("page", EN + ZH, ids=lambda p: p.name)
def test_no_hand_typed_number(page: Path):
    bad = hand_typed_numbers(page.read_text(encoding="utf-8"))
    assert not bad, f"{page.name}: numbers must come from a trace fact ({{{{ fact NAME }}}}):\n" + "\n".join(bad)


def test_the_number_check_catches_a_typed_number():
    assert hand_typed_numbers("R2 writes slots 10-12.") == ["1: R2 writes slots 10-12."]
    assert hand_typed_numbers("第2轮") and hand_typed_numbers("- positions 3, 4")
    assert not hand_typed_numbers("R2 writes slots {{ fact r2_slots }} in float32, UTF-8 and h2.")
    assert not hand_typed_numbers("see [the rows](batch-rows.md#the-nine-rows)")


def _figures(page: Path) -> list[str]:
    return sorted(" ".join([ph.kind, *ph.pos, *sorted(f"{k}={v}" for k, v in ph.kw.items()), *sorted(ph.flags)])
                  for ph in (parse(m.group(0)) for m in PLACEHOLDER.finditer(page.read_text(encoding="utf-8")))
                  if ph.kind in ("figure", "rows", "events"))


@pytest.mark.parametrize("page", EN, ids=lambda p: p.name)
def test_both_languages_show_the_same_figures(page: Path):
    zh = page.with_name(page.name[: -len(".md")] + ".zh.md")
    assert _figures(page) == _figures(zh)


@pytest.mark.parametrize("page", EN, ids=lambda p: p.name)
def test_each_lesson_has_figures_a_try_block_and_questions(page: Path):
    text = page.read_text(encoding="utf-8")
    kinds = [parse(m.group(0)).kind for m in PLACEHOLDER.finditer(text)]
    if page_slug(page.name) != "production":
        assert "figure" in kinds and "events" in kinds and "try" in kinds, page.name
        assert page_module(page_slug(page.name)) is not None, f"{page.name} has no course/lessons module"
    assert '??? question' in text, page.name
    assert "SGLang" in text, page.name
