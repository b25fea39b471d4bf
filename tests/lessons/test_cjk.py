"""Chinese paragraphs wrapped in the source read as one line on the page (no stray spaces)."""

from course.cjk import join_soft_breaks


def test_a_wrapped_chinese_paragraph_is_joined():
    assert join_soft_breaks("我们\n看到了\n`code`。") == "我们看到了`code`。"


def test_english_code_lists_tables_and_admonitions_keep_their_breaks():
    text = "one\ntwo\n\n- 列表\n- 第二项\n\n| a |\n| 表 |\n\n```text\n代码\n行\n```\n??? question \"问\"\n    答"
    out = join_soft_breaks(text)
    assert "one\ntwo" in out and "- 列表\n- 第二项" in out and "| a |\n| 表 |" in out
    assert "```text\n代码\n行\n```" in out and '??? question "问"\n    答' in out


def test_a_list_item_continued_on_the_next_line_is_joined():
    assert join_soft_breaks("- 列表\n  继续") == "- 列表继续"
