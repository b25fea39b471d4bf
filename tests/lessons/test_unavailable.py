"""A scenario that cannot run on this machine (pd_disaggregation without SGLang's router) costs only the
pages that need it: each is built as a notice naming the scenario and what it lacks, and the rest of the
course builds as usual. No engine runs here: the course cache records the missing scenario."""

from __future__ import annotations

from pathlib import Path

from course.build import Course
from course.traces import UNAVAILABLE, CourseTraces

DOCS = Path(__file__).resolve().parents[2] / "lessons" / "docs"
WHY = "needs SGLang's router: run `make router-env`"


def _course(tmp_path: Path) -> Course:
    traces = CourseTraces(root=tmp_path, say=lambda msg: None)
    folder = traces.path("pd_disaggregation")
    folder.mkdir(parents=True)
    (folder / UNAVAILABLE).write_text(f"{WHY}\n", encoding="utf-8")
    return Course(traces)


def test_the_page_that_needs_it_is_a_notice_in_both_languages(tmp_path):
    course = _course(tmp_path)
    for src, title in (("lessons/scale-out.md", "# Scaling out"), ("lessons/scale-out.zh.md", "# 横向扩展")):
        text = (DOCS / src).read_text(encoding="utf-8")
        assert course.missing(src, text) == {"pd_disaggregation": WHY}
        page = course.page(text, src)
        assert page.startswith(title) and "!!! warning" in page
        assert "`pd_disaggregation`" in page and "make router-env" in page and "{{" not in page


def test_pages_that_do_not_need_it_are_not_touched(tmp_path):
    course = _course(tmp_path)
    for src in ("lessons/admission.md", "lessons/overlap.zh.md", "index.md"):
        assert course.missing(src, (DOCS / src).read_text(encoding="utf-8")) == {}
