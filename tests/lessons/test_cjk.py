"""Chinese paragraphs wrapped in the source read as one line on the page (no stray spaces)."""

from course.cjk import join_soft_breaks, space_html


def test_a_wrapped_chinese_paragraph_is_joined():
    assert join_soft_breaks("我们\n看到了\n**粗体**和\n[链接](x.md)。") == "我们看到了**粗体**和[链接](x.md)。"


def test_a_break_between_chinese_and_latin_or_digits_keeps_its_space():
    assert join_soft_breaks("KV 池\n48 个槽位，进程之间的\n[ZeroMQ](x.md)，看到了\n`code`。") == (
        "KV 池 48 个槽位，进程之间的 [ZeroMQ](x.md)，看到了 `code`。")
    assert join_soft_breaks("句号。\nR1 到达") == "句号。R1 到达"


def test_the_built_page_is_spaced_outside_code_and_across_inline_tags():
    page = '<p>KV 池48 个，进程间的<a href="x">ZeroMQ</a>和<code>a中b</code>中文</p><pre><code>中文abc</code></pre>'
    assert space_html(page) == ('<p>KV 池 48 个，进程间的 <a href="x">ZeroMQ</a> 和 <code>a中b</code> 中文</p>'
                                "<pre><code>中文abc</code></pre>")
    assert space_html('<p><a href="x">链接</a>中文<strong>粗体</strong></p>') == (
        '<p><a href="x">链接</a>中文<strong>粗体</strong></p>')


def test_english_code_lists_tables_and_admonitions_keep_their_breaks():
    text = "one\ntwo\n\n- 列表\n- 第二项\n\n| a |\n| 表 |\n\n```text\n代码\n行\n```\n??? question \"问\"\n    答"
    out = join_soft_breaks(text)
    assert "one\ntwo" in out and "- 列表\n- 第二项" in out and "| a |\n| 表 |" in out
    assert "```text\n代码\n行\n```" in out and '??? question "问"\n    答' in out


def test_a_list_item_continued_on_the_next_line_is_joined():
    assert join_soft_breaks("- 列表\n  继续") == "- 列表继续"
