"""Diagrams in Chinese: every view of every scenario drawn with lang="zh" has no English prose left, while the
trace's own text (token text, rids, numbers, the engine's names and messages) is kept exactly."""

from __future__ import annotations

import html
import re

import pytest

from minisgl.scenarios import NAMES
from tracer.diagrams import DiagramError, render_diagram
from tracer.diagrams.lang import _QUOTED, language, tr

# words the Chinese pages keep in English too: the engine's field and state names, and the course's terms that
# stay in English (course/terms.py: token, prompt, extend, rid, trace, forward); prefill and decode as the
# names of a disaggregated pair's servers
KEPT = set("token prompt extend rid forward delta text usage completion status stop length room peer abort "
           "id trace decode prefill rank dp tp scheduler detokenizer controller Tokenized Req Engine "
           "Scheduler "
           "ModelRunner Detokenizer DataParallel Controller".split())


def english_words(text: str, messages: list[str] = ()) -> list[str]:
    """The English prose words of a label's text: not quoted token text, not a trace's message, not a name
    (snake_case, CamelCase, CAPITALS), not a path or a key=value."""
    text = _QUOTED.sub(" ", html.unescape(text))
    for m in messages:  # the engine's own message (an error's): shown as it was sent, to the end of its line
        text = re.sub(re.escape(m[:30]) + r"[^\n]*", " ", text)
    text = re.sub(r"\(matched=[^)]*\)|\S+=\S*|all-reduce|all-gather|\S*/\S+", " ", text)
    return [w for w in re.findall(r"[A-Za-z][A-Za-z_0-9]*", text)
            if len(w) > 1 and "_" not in w and w not in KEPT and not w.isupper()
            and not any(c.isupper() for c in w[1:])]


def messages(trace) -> list[str]:
    return sorted({str(ev.get("message")) for ev in trace.events if ev.get("message")}, key=len, reverse=True)


def _dot_labels(dot: str) -> list[str]:
    """The text a reader sees in a DOT file: its labels, markup removed (tooltips left out)."""
    out = []
    for m in re.finditer(r'\b(?:label|xlabel)=(?:"((?:[^"\\]|\\.)*)"|<(.*?)>(?=[,\]]|;\n))', dot, re.DOTALL):
        plain, markup = m.groups()
        if plain is not None:  # DOT's escapes: \n a line break, \\ and \" themselves
            out.append(re.sub(r"\\(.)", lambda e: "\n" if e.group(1) == "n" else e.group(1), plain))
        else:
            out.append(re.sub(r"<[^>]+>", " ", markup))
    return out


def _drawings(trace):
    """Every view of the trace as DOT (and the three with a Mermaid form as Mermaid), in Chinese."""
    for view in ("round", "kv", "radix", "admission"):
        for kw in ({"all_rounds": True}, {}):
            try:
                yield view, _dot_labels(render_diagram(trace, view, "dot", lang="zh", **kw))
            except DiagramError:
                pass
    for rid in trace.rids()[:6]:
        for kw in ({"all_rounds": True}, {}):
            dot = render_diagram(trace, "lifecycle", "dot", rid=rid, lang="zh", **kw)
            yield "lifecycle", _dot_labels(dot)
        for view in ("lifecycle", "admission", "radix"):
            try:
                text = render_diagram(trace, view, "mermaid", rid=rid, lang="zh")
            except DiagramError:
                continue
            yield f"{view} (mermaid)", [mermaid_words(text)]


def mermaid_words(text: str) -> str:
    """The text a reader sees in a Mermaid diagram: its labels and title, without Mermaid's own words."""
    def front(m: re.Match) -> str:  # the front matter: its title alone
        return "".join(t + "\n" for t in re.findall(r"^title: (.*)$", m.group(0), re.MULTILINE))

    text = re.sub(r"^---\n.*?^---\n", front, text, flags=re.MULTILINE | re.DOTALL)
    # a state diagram: its state ids and the trace's event names on the arrows are names; a state's label is
    # what `state "LABEL" as id` declares
    text = re.sub(r'^\s*state "([^"]*)" as \w+', r"\1", text, flags=re.MULTILINE)
    text = re.sub(r"^\s*stateDiagram-v2$|^\s*(?:\[\*\]|\w+) --> (?:\[\*\]|\w+)|\b[a-z]+\.[a-z_]+\b", " ",
                  text, flags=re.MULTILINE)
    return re.sub(r"^\s*(?:class|classDef|flowchart|sequenceDiagram|end|%%).*$|"
                  r"^\s*(?:participant \w+ as|Note over \w+:|\w+-?->>\w+:|subgraph \w+)|\b\w+_\w+\b|"
                  r"\bn\d+\b|#\w+;|-->|-\.->|\|", " ", text, flags=re.MULTILINE)


@pytest.mark.parametrize("name", NAMES)
def test_every_view_of_every_scenario_has_no_english_prose_in_chinese(scenario_runs, name):
    trace = scenario_runs(name).trace
    said = messages(trace)
    left = {}
    for view, labels in _drawings(trace):
        for label in labels:
            for word in english_words(label, said):
                left.setdefault(word, f"{view}: {' '.join(label.split())[:120]}")
    assert not left, f"{name}: English left in the Chinese drawing:\n" + "\n".join(
        f"  {w!r} in {where}" for w, where in sorted(left.items()))


def test_the_trace_s_own_text_is_kept_and_english_is_unchanged(scenario_runs):
    trace = scenario_runs("one_request").trace
    en = render_diagram(trace, "lifecycle", "dot", rid="R1")
    assert en == render_diagram(trace, "lifecycle", "dot", rid="R1", lang="en")
    zh = render_diagram(trace, "lifecycle", "dot", rid="R1", lang="zh")
    assert "请求 R1 的生命周期" in zh and "Lifecycle of request" not in zh

    def kept(dot: str) -> tuple[list[str], list[str]]:  # token text, and the engine's CamelCase names
        text = html.unescape(" ".join(" ".join(label.split()) for label in _dot_labels(dot)))
        return sorted(_QUOTED.findall(text)), sorted(re.findall(r"\b[A-Z][a-z]+[A-Z]\w*", text))

    assert kept(zh) == kept(en)
    assert tr("delta ' capital'") == "delta ' capital'"  # outside language("zh"): English
    with language("zh"):
        assert tr("next token 40 ' rounds 3–7'") == "下一个 token 40 ' rounds 3–7'"  # quoted text untouched
    with pytest.raises(DiagramError, match="unknown language"):
        render_diagram(trace, "kv", "dot", lang="fr")
