"""The labs on the course pages: a "Build it yourself" block under a lesson, and the table of every lab,
both read from the lab catalog (minisgl/labs/catalog), so a page never lists a lab that does not exist."""

from __future__ import annotations

import posixpath

from course.placeholders import PlaceholderError

TITLE = {"en": "Build it yourself", "zh": "自己动手实现"}
BODY = {
    "en": "In the lab **{name}** you write {what} yourself, run the real engine with it, and see the first "
          "event where your trace leaves the reference. [How labs work]({labs}).",
    "zh": "在实验 **{name}** 里，你亲手实现 {what}，用它跑真实的引擎，"
          "然后看你的 trace 从哪一个事件开始偏离参考 trace。[实验怎么做]({labs})。",
}
HEAD = {"en": ("lab", "you write", "lesson", "scenario", "in SGLang"),
        "zh": ("实验", "你要实现", "课程", "场景", "SGLang 中的位置")}


def _rel(src_uri: str, target: str) -> str:
    return posixpath.relpath(target, posixpath.dirname(src_uri) or ".")


def _lab(name: str):
    from minisgl.labs.catalog import UnknownLab, get

    try:
        return get(name)
    except UnknownLab as e:
        raise PlaceholderError(str(e)) from None


def _component(lab) -> str:
    from minisgl.labs.components import get

    return f"`{get(lab.component).title}`"


def lab_block(name: str, src_uri: str, lang: str) -> str:
    lab = _lab(name)
    body = BODY[lang].format(name=lab.name, what=_component(lab), labs=_rel(src_uri, "labs.md"))
    cmds = [f"minisgl lab start {lab.name}", f"minisgl lab test {lab.name}", f"minisgl lab grade {lab.name}",
            f"minisgl lab hint {lab.name}"]
    code = "\n".join("    " + c for c in ["```bash", *cmds, "```"])
    return f'!!! tip "{TITLE[lang]}"\n    {body}\n\n{code}\n'


def labs_table(src_uri: str, lang: str) -> str:
    from minisgl.labs.catalog import all_labs

    rows = ["| " + " | ".join(HEAD[lang]) + " |", "|---|---|---|---|---|"]
    for lab in all_labs():
        lesson = f"[{lab.lesson}]({_rel(src_uri, f'lessons/{lab.lesson}.md')})"
        where = lab.sglang.split(":")[0]
        scenarios = ", ".join(f"`{n}`" for n in lab.scenarios)
        rows.append(f"| `{lab.name}` | {_component(lab)} | {lesson} | {scenarios} | `{where}` |")
    return "\n".join(rows)


MUTANTS_HEAD = {
    "en": ("lab", "mutants", "equivalent", "killed by the differential check", "by the trace",
           "by the unit tests only", "survived", "differential + trace"),
    "zh": ("实验", "变异体", "等价", "被差分检查杀死", "被 trace 杀死", "只被单元测试杀死", "存活",
           "差分 + trace"),
}
NOT_MEASURED = {"en": "not measured yet (`make lab-mutants LABS={name}`)",
                "zh": "尚未测量（`make lab-mutants LABS={name}`）"}


def mutants_table(lang: str) -> str:
    """Each lab's measured mutation run (catalog/<lab>/mutants.json, written by `make lab-mutants`)."""
    from minisgl.labs.catalog import all_labs
    from minisgl.labs.mutants import recorded

    rows = ["| " + " | ".join(MUTANTS_HEAD[lang]) + " |", "|---" * len(MUTANTS_HEAD[lang]) + "|"]
    for lab in all_labs():
        t = recorded(lab)
        if t is None:
            rows.append(f"| `{lab.name}` | {NOT_MEASURED[lang].format(name=lab.name)} |" + " |" * 6)
            continue
        rows.append(f"| `{lab.name}` | {t.mutants} | {t.equivalent} | {t.by_differential} | {t.by_trace} | "
                    f"{t.by_tests_only} | {t.survived} | {100 * t.rate():.1f} % |")
    return "\n".join(rows)
