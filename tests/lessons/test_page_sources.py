"""The lesson pages' sources: no hand-typed numbers, both languages, the same figures in each.

These read the Markdown only (no build, no model), so they run in a second; tests/lessons/test_site.py
builds the site and checks every placeholder resolves against real traces.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from course.build import page_slug
from course.cjk import CJK
from course.facts import page_module
from course.placeholders import PLACEHOLDER, parse

DOCS = Path(__file__).resolve().parents[2] / "lessons" / "docs"
LESSONS = DOCS / "lessons"
EN = sorted(p for p in LESSONS.glob("*.md") if not p.name.endswith(".zh.md"))
ZH = sorted(LESSONS.glob("*.zh.md"))

# a number standing alone: not part of a word such as R1, float32, UTF-8 or h2
NUMBER = re.compile(r"(?<![A-Za-z0-9_\-./:#])\d+(?:[.,]\d+)*(?![A-Za-z0-9_])")  # ASCII: 第2轮 is caught


# a count spelled out, of what a trace counts: "Five requests", "五个请求" (one and two read as words, not counts)
THINGS_EN = r"requests?|rounds?|tokens?|slots?|rows?|processes|ranks?|chunks?|events?|messages?"
SPELLED_EN = re.compile(r"\b(?:three|four|five|six|seven|eight|nine|ten|eleven|twelve|[a-z]+teen|twenty)"
                        rf"\s+(?:[a-z]+\s+)?(?:{THINGS_EN})\b", re.I)
SPELLED_ZH = re.compile(r"[三四五六七八九十][一二三四五六七八九十百]*\s*[个条轮次]\s*(?:请求|token|槽位|行|进程|rank|chunk|事件|消息)", re.I)
# a placeholder's argument that is a number (round=3) must name a fact instead (round=@n); limit= only
# trims a list
LITERAL_ARG = re.compile(r"\b(?!limit=)[a-z_]+=-?\d+\b")


def hand_typed_numbers(text: str) -> list[str]:
    """Every line that shows a number not produced by a placeholder: digits, a spelled-out count of what a
    trace counts, or a number given to a placeholder as a literal argument."""
    found = []
    for lineno, line in enumerate(text.splitlines(), 1):
        # a whatif's question is prose of the page; its set= and prompt= are the run's changed inputs
        asks = [parse(m.group(0)).kw.get("ask", "") for m in PLACEHOLDER.finditer(line) if m["kind"] == "whatif"]
        bare = " ".join([PLACEHOLDER.sub(" ", line), *asks])
        bare = re.sub(r"\]\([^)]*\)", "]", bare)  # a link's target (file names of other pages)
        prose = re.sub(r"`[^`]*`", " ", bare)  # code: a prompt's words (" one two three four") are its text
        literal = any(LITERAL_ARG.search(m.group("args")) for m in PLACEHOLDER.finditer(line)
                      if m["kind"] != "whatif")
        if NUMBER.search(bare) or SPELLED_EN.search(prose) or SPELLED_ZH.search(prose) or literal:
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


def test_the_number_check_catches_spelled_out_counts_and_literal_arguments():
    assert hand_typed_numbers("Five requests arrive.") and hand_typed_numbers("then three more rounds")
    assert hand_typed_numbers("五个请求陆续到达") and hand_typed_numbers("一共十二 个槽位")
    assert hand_typed_numbers("{{ figure retract round=3 }}")
    assert hand_typed_numbers("{{ try abort round=7 }}")
    assert not hand_typed_numbers("{{ fact admission_budgets:requests }} requests, three ways to scale")
    assert not hand_typed_numbers("{{ events retract round=@n limit=6 }}, the prompt `\" one two three\"`")
    assert not hand_typed_numbers("五项预算；三种横向扩展的办法；这三条规则")
    assert not hand_typed_numbers("{{ whatif chunked_prefill set=chunked_prefill_size=12 ask='How many rounds?' }}")
    assert hand_typed_numbers("{{ whatif chunked_prefill set=chunked_prefill_size=12 ask='Is it 4 rounds?' }}")


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
        assert page_module(page_slug(page.name)) is not None, f"{page.name} has no course/page_facts module"
    assert '??? question' in text, page.name
    assert "SGLang" in text, page.name


@pytest.mark.parametrize("page", EN + ZH, ids=lambda p: p.name)
def test_each_lesson_ends_with_a_change_a_number_question(page: Path):
    """A transfer question (`{{ whatif SCENARIO set=... ask=... }}`) on every lesson: its answer is the
    changed run's, made at build time; the question is written in the page's own language."""
    asks = [parse(m.group(0)) for m in PLACEHOLDER.finditer(page.read_text(encoding="utf-8"))
            if m["kind"] == "whatif"]
    assert asks, f"{page.name} asks no whatif question"
    for ph in asks:
        assert ph.pos and ("set" in ph.kw or "prompt" in ph.kw) and ph.kw.get("ask"), ph.text
        assert CJK.search(ph.kw["ask"]) if page.name.endswith(".zh.md") else not CJK.search(ph.kw["ask"])


def _defined_in_minisgl() -> set[str]:
    """Every class, function, attribute and dataclass field name defined under minisgl/."""
    names: set[str] = set()
    for path in (DOCS.parents[1] / "minisgl").rglob("*.py"):
        src = path.read_text(encoding="utf-8")
        names.update(re.findall(r"^\s*(?:async\s+)?(?:def|class)\s+(\w+)", src, re.M))
        names.update(re.findall(r"self\.(\w+)\s*(?::[^=\n]+)?=", src))
        names.update(re.findall(r"^\s+(\w+)\s*:\s*[\w\[\]|., ]+(?:=|$)", src, re.M))
    return names


@pytest.mark.parametrize("page", ["source-names.md", "source-names.zh.md"])
def test_the_source_documents_names_map_onto_what_minisgl_defines(page: str):
    """The table that maps the Chinese source document's mini-sglang names onto SGLang's and this project's:
    every name in its minisgl column is defined under minisgl/ and every event in its last column is in the
    trace schema, so a rename cannot leave either behind."""
    from tracer import schema

    text = (DOCS / "reference" / page).read_text(encoding="utf-8")
    rows = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| ---")][1:]
    assert len(rows) >= 15, rows
    defined = _defined_in_minisgl()
    events = set(schema.EVENTS)
    for row in rows:
        cells = row.strip().strip("|").split("|")
        for name in re.findall(r"`([\w.]+)`", cells[2]):
            missing = [part for part in name.split(".") if part not in defined]
            assert not missing, f"{page}: {name} ({missing} not defined under minisgl/)"
        named = [e for e in re.findall(r"`([a-z]+\.[a-z_*]+)`", cells[3]) if not e.endswith("*")]
        assert named or "tm.*" in cells[3], f"{page}: no trace event for {cells[0].strip()}"
        assert set(named) <= events, f"{page}: {set(named) - events} are not trace events (tracer/schema.py)"


def test_the_lessons_link_the_source_documents_names():
    for page in ("tokenizer-manager.md", "tokenizer-manager.zh.md", "detokenizer.md", "detokenizer.zh.md"):
        assert "../reference/source-names.md" in (LESSONS / page).read_text(encoding="utf-8"), page