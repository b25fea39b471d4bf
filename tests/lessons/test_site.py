"""The built lesson site: every placeholder filled in from the real traces, both languages alike, every
internal link and anchor resolving, and a bad placeholder failing the build with its name."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin, urlparse

import pytest

from tests.lessons.test_page_sources import EN

pytestmark = pytest.mark.slow

SLUGS = [p.name[: -len(".md")] for p in EN]


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.links: list[str] = []
        self.images: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"])
        if tag == "a" and a.get("href"):
            self.links.append(a["href"])
        if tag == "img" and a.get("src"):
            self.images.append(a["src"])


def parsed(path: Path) -> _Page:
    p = _Page()
    p.feed(path.read_text(encoding="utf-8"))
    return p


def lesson_html(site: Path, slug: str, lang: str) -> Path:
    return site / ("zh/" if lang == "zh" else "") / "lessons" / slug / "index.html"


@pytest.mark.parametrize("slug", SLUGS)
def test_each_lesson_is_built_in_both_languages_with_the_same_figures(built_site: Path, slug: str):
    en, zh = (lesson_html(built_site, slug, lang) for lang in ("en", "zh"))
    assert en.exists() and zh.exists()
    en_page, zh_page = parsed(en), parsed(zh)
    # the same figures, whatever the folder depth of each language's page: the zh page's drawn in Chinese
    figs = [sorted(urljoin(f"/{base}", src) for src in page.images)
            for base, page in ((f"lessons/{slug}/", en_page), (f"zh/lessons/{slug}/", zh_page))]
    assert [re.sub(r"\.svg$", "-zh.svg", f) if "/figures/" in f else f for f in figs[0]] == figs[1]
    for src in figs[0] + figs[1]:
        assert (built_site / src.lstrip("/")).stat().st_size > 0, src
    html = en.read_text(encoding="utf-8") + zh.read_text(encoding="utf-8")
    assert "{{" not in html, "a placeholder was left unfilled"
    assert 'lang="zh' in zh.read_text(encoding="utf-8")


def test_every_internal_link_and_anchor_resolves(built_site: Path):
    pages = sorted(built_site.rglob("*.html"))
    cache: dict[Path, _Page] = {}

    def page_of(path: Path) -> _Page:
        if path not in cache:
            cache[path] = parsed(path)
        return cache[path]

    broken = []
    for page in pages:
        url = "/" + page.relative_to(built_site).as_posix()
        for href in page_of(page).links:
            target = urlparse(urljoin(url, href))
            if target.scheme or target.netloc:
                continue  # outside the site (SGLang's source on GitHub, ...)
            path = built_site / unquote(target.path).lstrip("/")
            if path.is_dir() or not path.suffix:
                path = path / "index.html"
            if not path.exists():
                broken.append(f"{url}: {href} (no such page)")
                continue
            if target.fragment and path.suffix == ".html":
                ids = page_of(path).ids
                if unquote(target.fragment) not in ids:
                    broken.append(f"{url}: {href} (no anchor {target.fragment!r})")
    assert not broken, "\n".join(broken[:40])


def test_a_page_quotes_only_what_the_trace_gives(course_cache: Path):
    """The build refuses an unknown fact, and a page's numbers change with the trace they come from."""
    from course.build import Course
    from course.placeholders import PlaceholderError
    from course.traces import CourseTraces

    course = Course(CourseTraces(course_cache))
    with pytest.raises(PlaceholderError, match="no fact 'nine_rows'"):
        course.page("R1 and R2: {{ fact nine_rows }} rows.", "lessons/batch-rows.md")
    text = course.page("{{ fact extend_rows }} rows, slots {{ fact r2_slots }}", "lessons/batch-rows.md")
    formed = [ev for ev in course.traces["shared_prefix"].events if ev.name == "model.forward" and ev.ph == "B"]
    assert text.startswith(f"{max(ev.get('num_rows') for ev in formed)} rows, slots ")
    with pytest.raises(PlaceholderError, match="round 99 formed no batch"):
        course.page("{{ rows shared_prefix round=99 }}", "lessons/batch-rows.md")


def test_the_nine_rows_table_matches_the_forward(built_site: Path, course_cache: Path):
    """Lesson batch-rows: its table is the forward's own positions and slots, row by row."""
    from course.blocks import batch_rows
    from course.traces import CourseTraces

    trace = CourseTraces(course_cache)["shared_prefix"]
    forward = next(ev for ev in trace.events if ev.name == "model.forward" and ev.ph == "B"
                   and ev.get("forward_mode") == "EXTEND" and "R2" in (ev.rids or ()))
    rows = batch_rows(trace, forward.round)
    assert [r["position"] for r in rows] == forward.get("positions")
    assert [r["out_cache_loc"] for r in rows] == forward.get("out_cache_loc")
    html = lesson_html(built_site, "batch-rows", "en").read_text(encoding="utf-8")
    cells = re.findall(r"<tr>\s*<td>(\d+)</td>\s*<td>(R\d)</td>\s*<td>(\d+)</td>", html)
    assert [(int(i), rid, int(p)) for i, rid, p in cells][: len(rows)] == \
        [(r["row"], r["rid"], r["position"]) for r in rows]


def test_the_overlap_lesson_shows_the_traces_placeholders(built_site: Path, course_cache: Path):
    """Lesson overlap: the placeholder ids it quotes are the negative input ids of the first batch formed
    before the last round's tokens existed, the tokens they resolve to are the ones that round's forward
    read, and the round that shows them to the scheduler is the one that processes the previous result."""
    from course.build import Course
    from course.traces import CourseTraces

    course = Course(CourseTraces(course_cache))
    trace = course.traces["overlap_schedule"]
    formed = next(ev for ev in trace.events if ev.name == "sched.batch_formed"
                  and any(i < 0 for i in ev.get("input_ids")))
    forward = next(ev for ev in trace.events if ev.name == "model.forward" and ev.ph == "B"
                   and ev.round == formed.round)
    seen = next(ev for ev in trace.events if ev.name == "sched.sampled"
                and ev.get("batch_round") == formed.round - 1)
    ids = [i for i in formed.get("input_ids") if i < 0]
    tokens = [t for i, t in zip(formed.get("input_ids"), forward.get("input_ids")) if i < 0]
    owners = [rid for rid, i in zip(formed.rids, formed.get("input_ids")) if i < 0]  # one decode row each
    assert tokens == [seen.get("token_ids")[seen.rids.index(rid)] for rid in owners]
    shown = ", ".join(map(str, ids)), ", ".join(map(str, tokens))
    text = course.page("{{ fact ph_round }}: {{ fact ph_ids }} -> {{ fact ph_tokens }}, "
                       "seen in {{ fact ph_seen }}", "lessons/overlap.md")
    assert text == f"{formed.round}: {shown[0]} -> {shown[1]}, seen in {seen.round}"
    # the finished request's extra row: its slot in the round it finished, freed one round later
    done = next(ev for ev in trace.events if ev.name == "sched.finished")
    batch = next(ev for ev in trace.events if ev.name == "sched.batch_formed" and ev.round == done.round)
    slot = batch.get("out_cache_loc")[batch.rids.index(done.rid)]
    freed = next(ev for ev in trace.events if ev.name == "kv.free" and slot in ev.get("slots"))
    assert (freed.round, freed.get("reason")) == (done.round + 1, "finished")
    assert course.page("{{ fact late_freed_round }}", "lessons/overlap.md") == str(freed.round)
    for lang in ("en", "zh"):
        html = lesson_html(built_site, "overlap", lang).read_text(encoding="utf-8")
        row = re.search(rf"<td>{formed.round}</td>\s*<td>DECODE [^<]*</td>\s*<td>([^<]*)</td>", html)
        assert row and row.group(1) == f"{shown[0]} → {shown[1]}", lang
