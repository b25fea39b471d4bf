"""The syllabus's coverage: each concept of the source documents (lessons/docs/reference/coverage.md lists
them), where the engine implements it, the trace event that shows it, the lesson section that teaches it,
a test that exercises it and the lab whose learner writes it. The data is coverage.tsv; `problems()`
checks every reference against the repository (tests/lessons/test_coverage.py), so a rename or a removed
page, event or lab cannot leave the table behind."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "lessons" / "docs"
HEAD = {"en": ("concept", "source document", "implemented in", "trace event", "taught in", "tested in",
               "lab"),
        "zh": ("概念", "源文档", "实现", "追踪事件", "讲解", "测试", "实验")}


def concepts() -> list[tuple[str | None, ...]]:
    """(concept, source document, "path:Name", trace event, "lessons/page.md#section", test file, lab) per
    row of coverage.tsv, None for its `-`."""
    rows = [line.split("\t") for line in (Path(__file__).with_name("coverage.tsv")).read_text(
        encoding="utf-8").splitlines() if line and not line.startswith("#")]
    return [tuple(None if cell == "-" else cell for cell in row) for row in rows[1:]]


def slug(heading: str) -> str:
    """A heading's anchor as the docs build makes it (Python-Markdown's toc slugify)."""
    text = unicodedata.normalize("NFKD", heading).encode("ascii", "ignore").decode()
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(page: Path) -> set[str]:
    found = set()
    for line in page.read_text(encoding="utf-8").splitlines():
        m = re.match(r"^#{1,6}\s+(.*?)\s*(?:\{\s*#([\w-]+)\s*\})?\s*$", line)
        if m:
            found.add(m.group(2) or slug(m.group(1)))
    return found


def _defines(path: Path, name: str) -> bool:
    src = path.read_text(encoding="utf-8")
    return re.search(rf"^\s*(?:async\s+)?(?:def|class)\s+{name}\b|^\s*{name}\s*(?::[^=\n]+)?=", src,
                     re.M) is not None


def problems() -> list[str]:
    """Every reference of the table that the repository no longer has."""
    from minisgl.labs import catalog
    from tracer.schema import EVENTS

    out, labs = [], set(catalog.names())
    for concept, seed, code, event, lesson, test, lab in concepts():
        if not re.fullmatch(r"00[0-4]", seed):  # the five source documents, 000 to 004
            out.append(f"{concept}: no source document {seed}")
        if code is not None:
            path, _, names = code.partition(":")
            if not (ROOT / path).is_file():
                out.append(f"{concept}: {path} does not exist")
            else:
                out += [f"{concept}: {path} defines no {n}" for n in names.split(".")
                        if not _defines(ROOT / path, n)]
        if event is not None and event not in EVENTS:
            out.append(f"{concept}: {event} is not a trace event (tracer/schema.py)")
        if lesson is not None:
            page, _, anchor = lesson.partition("#")
            if not (DOCS / page).is_file():
                out.append(f"{concept}: no page {page}")
            elif anchor and anchor not in anchors(DOCS / page):
                out.append(f"{concept}: {page} has no section #{anchor}")
        if test is not None and not (ROOT / test).is_file():
            out.append(f"{concept}: no test file {test}")
        if lab is not None and lab not in labs:
            out.append(f"{concept}: no lab {lab}")
    return out


def coverage_table(lang: str = "en") -> str:
    """The table of the coverage page: one row per concept, its lesson linked."""
    lines = ["| " + " | ".join(HEAD[lang]) + " |", "|" + "---|" * len(HEAD[lang])]
    for concept, seed, code, event, lesson, test, lab in concepts():
        page = None
        if lesson is not None:  # the same link on both languages' pages: the build picks the page's language
            path, _, anchor = lesson.partition("#")
            translated = DOCS / path.replace(".md", f".{lang}.md")
            if lang != "en" and translated.is_file() and anchor not in anchors(translated):
                anchor = ""  # a section named in that language has an anchor of its own: link the page
            page = f"[{Path(path).stem}](../{path}{'#' + anchor if anchor else ''})"
        cells = [concept, seed, f"`{code}`" if code else "", f"`{event}`" if event else "", page or "",
                 f"`{test}`" if test else "", f"`{lab}`" if lab else ""]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)


def summary(lang: str = "en") -> str:
    rows = concepts()
    counts = [sum(1 for r in rows if r[i] is not None) for i in (2, 3, 4, 5, 6)]
    if lang == "zh":
        return (f"共 {len(rows)} 个概念：{counts[0]} 个在引擎中实现，{counts[1]} 个有追踪事件，"
                f"{counts[2]} 个在课程中讲解，{counts[3]} 个有测试，{counts[4]} 个由实验让学习者亲手实现。")
    return (f"{len(rows)} concepts: {counts[0]} implemented in the engine, {counts[1]} shown by a trace "
            f"event, {counts[2]} taught in a lesson, {counts[3]} exercised by a test, {counts[4]} written by "
            "the learner in a lab.")
