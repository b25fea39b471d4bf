"""The Chinese pages follow the terminology table (course/terms.py): one name per concept, the same section
labels as their English twins, and the home page naming each lesson by its title. Reads the Markdown only."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from course.terms import GLOSSARY, SECTIONS, TERMS
from tests.lessons.test_page_sources import DOCS, EN, ZH

PAGES = [DOCS / "index.zh.md", DOCS / "labs.zh.md", *ZH]

CODE = re.compile(r"^(```|~~~).*?^\1[^\n]*$|`[^`\n]+`|\{\{.*?\}\}|\]\([^)]*\)|<[^>\n]+>", re.S | re.M)


def prose(markdown: str) -> str:
    """The text a reader sees: code blocks and spans, placeholders, link targets and HTML tags left out."""
    return CODE.sub(" ", markdown)


def variants(markdown: str) -> list[str]:
    text = prose(markdown)
    return [f"{m.group(0)!r} (say {term.zh})" for term in TERMS for pattern in term.avoid
            for m in re.finditer(pattern, text)]


def test_the_check_finds_a_variant_but_not_code():
    assert variants("R1 的 Prompt 有 3 枚 Token，进了 radix 缓存，被回退。") == [
        "'radix 缓存' (say 基数树缓存)", "'回退' (say 撤回)", "'Token' (say token)", "'枚' (say token)",
        "'Prompt' (say prompt)"]
    assert not variants("`sched.retract` 与 `TokenizerManager` 在 `radix cache` 里，[基数树缓存](radix-cache.md)")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_one_chinese_name_per_concept(page: Path):
    found = variants(page.read_text(encoding="utf-8"))
    assert not found, f"{page.name}: " + ", ".join(found)


def _labels(text: str) -> list[str]:
    return [label for label in dict.fromkeys((*SECTIONS, *SECTIONS.values()))
            if re.search("^" + re.escape(label) + "$" if label.startswith("#") else "^" + re.escape(label),
                         text, re.M)]


@pytest.mark.parametrize("page", EN, ids=lambda p: p.name)
def test_a_chinese_page_labels_its_sections_as_its_english_twin(page: Path):
    zh = page.with_name(page.name[: -len(".md")] + ".zh.md")
    want = sorted({SECTIONS[label] for label in _labels(page.read_text(encoding="utf-8"))})
    assert want, f"{page.name} has none of the lesson section labels"
    assert sorted(_labels(zh.read_text(encoding="utf-8"))) == want, zh.name


def title(page: Path) -> str:
    """A lesson's name: its title up to the colon (“准入：PrefillAdder 的预算” is “准入”), as on the home page."""
    lines = page.read_text(encoding="utf-8").splitlines()
    h1 = next(line[2:].strip() for line in lines if line.startswith("# "))
    return h1.split("：")[0]


def test_the_home_page_and_the_menu_name_each_lesson_by_its_title():
    home = (DOCS / "index.zh.md").read_text(encoding="utf-8")
    listed = {target: name
              for name, target in re.findall(r"^- \[([^\]]+)\]\((lessons/[\w-]+)\.md\)", home, re.M)}
    assert sorted(listed) == sorted(f"lessons/{p.name[: -len('.zh.md')]}" for p in ZH)
    config = (DOCS.parents[1] / "mkdocs.yml").read_text(encoding="utf-8")
    menu = {target: en for en, target in re.findall(r"^ +- \"?(.+?)\"?: (lessons/[\w-]+)\.md$", config, re.M)}
    translated = {m[0] or m[2]: (m[1] or m[3]).split("：")[0]
                  for m in re.findall(r'^ {12}(?:"(.+)": (.+)|([^":]+): (.+))$', config, re.M)}
    wrong = [f"{target}: home {name!r}, menu {translated.get(menu.get(target))!r}, "
             f"title {title(DOCS / (target + '.zh.md'))!r}"
             for target, name in listed.items()
             if not name == translated.get(menu.get(target)) == title(DOCS / (target + ".zh.md"))]
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_glossary_defines_every_term_in_both_languages(lang: str):
    page = (DOCS / ("glossary.zh.md" if lang == "zh" else "glossary.md")).read_text(encoding="utf-8")
    anchors = re.findall(r"\{ *#([\w-]+) *\}", page)
    assert sorted(anchors) == sorted(g.anchor for g in GLOSSARY)
    if lang == "zh":
        missing = [t.zh for t in TERMS if t.zh not in page]
        assert not missing, missing
