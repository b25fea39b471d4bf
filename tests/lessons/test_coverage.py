"""The syllabus's coverage table (course/coverage.py, the coverage page): every file, name, trace event,
lesson section, test and lab it points at exists, and every concept of the source documents is in it once."""

from __future__ import annotations

from course.coverage import anchors, concepts, coverage_table, problems, slug


def test_every_reference_of_the_table_exists():
    assert not problems(), "the coverage table points at things that are gone:\n" + "\n".join(problems())


def test_each_concept_once_and_most_of_them_taught():
    rows = concepts()
    names = [r[0] for r in rows]
    assert len(rows) >= 80 and len(set(names)) == len(names)
    assert sum(r[4] is not None for r in rows) >= 0.8 * len(rows), "most concepts are taught in a lesson"
    assert coverage_table().count("\n") == len(rows) + 1


def test_a_heading_anchor_is_the_one_the_site_makes(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("# Title\n## The chunked request\n### Two new prompts, packed { #packed-rows }\n")
    assert anchors(page) == {"title", "the-chunked-request", "packed-rows"}
    assert slug("Refused: a prompt that cannot fit") == "refused-a-prompt-that-cannot-fit"
