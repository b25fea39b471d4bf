"""The course as the docs build sees it: which scenarios and figures the pages need, and each page's
placeholders turned into Markdown (see placeholders.py for the syntax)."""

from __future__ import annotations

import posixpath
from pathlib import Path

from course import blocks
from course.cjk import join_soft_breaks
from course.facts import Facts
from course.figures import Figure, sync
from course.placeholders import Placeholder, PlaceholderError, Resolver, find, parse, render
from course.traces import CourseTraces
from tracer.diagrams import GraphvizMissing
from tracer.reader import TraceError

LESSONS = "lessons"  # the lesson pages' folder under the docs folder
# a lifecycle's sequence diagram laid out for the page's column: narrower participants, notes wrapped to them
SEQUENCE_FIT = ("---\nconfig:\n  sequence:\n    width: 100\n    actorMargin: 20\n    noteMargin: 6\n"
                "    wrap: true\n---\n")


def page_slug(src_uri: str) -> str:
    """`lessons/radix-cache.zh.md` -> `radix-cache` (the key of the page's facts module)."""
    name = posixpath.basename(src_uri)
    for suffix in (".zh.md", ".md"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def page_lang(src_uri: str) -> str:
    return "zh" if src_uri.endswith(".zh.md") else "en"


class Course:
    def __init__(self, traces: CourseTraces | None = None) -> None:
        self.traces = traces or CourseTraces()
        self.facts = Facts(self.traces)

    # -- before the build: run what is missing, draw every figure --------------------------------------
    def sources(self, docs_dir: Path) -> dict[str, str]:
        return {p.relative_to(docs_dir).as_posix(): p.read_text(encoding="utf-8")
                for p in sorted(docs_dir.rglob("*.md"))}

    def scenarios(self, src: str, text: str) -> list[str]:
        """Every scenario a page needs: its facts module's and its placeholders'."""
        needed = list(self.facts.scenarios_of(page_slug(src)))
        needed += [ph.pos[0] for ph in self._placeholders(text)
                   if ph.kind in ("figure", "events", "rows", "try") and ph.pos]
        needed += [ph.pos[0].split(":")[0] for ph in self._placeholders(text) if ph.kind == "fact"
                   and ph.pos and ":" in ph.pos[0]]
        needed += [self.whatif(ph)[0] for ph in self._placeholders(text) if ph.kind == "whatif"]
        needed += [name for ph in self._placeholders(text) if ph.kind == "states" for name in ph.pos]
        return needed

    def whatif(self, ph: Placeholder) -> tuple[str, dict, dict]:
        """(the changed run's cache key, its --set changes, its --prompt changes), the run registered."""
        from minisgl.scenarios.changes import ChangeError, change, parse_pairs, parse_value
        from minisgl.scenarios import get

        if not ph.pos:
            raise PlaceholderError(f"{ph.text}: whatif needs a scenario")
        try:
            sets = {k: parse_value(v) for k, v in parse_pairs(
                [s for s in ph.kw.get("set", "").split(",") if s], "set").items()}
            prompts = parse_pairs([ph.kw["prompt"]] if "prompt" in ph.kw else [], "prompt")
            change(get(ph.pos[0]), sets, prompts)  # a bad change fails the build here, with its reason
        except (ChangeError, LookupError) as e:
            raise PlaceholderError(f"{ph.text}: {e}") from None
        return self.traces.changed(ph.pos[0], sets, prompts), sets, prompts

    def missing(self, src: str, text: str) -> dict[str, str]:
        """The scenarios of a page that could not run on this machine, with what each lacks."""
        return {n: why for n in dict.fromkeys(self.scenarios(src, text))
                if (why := self.traces.reason_unavailable(n)) is not None}

    def prepare(self, docs_dir: Path) -> None:
        pages = self.sources(docs_dir)
        self.traces.ensure([n for src, text in pages.items() for n in self.scenarios(src, text)])
        drawn: dict[str, bytes] = {}
        for src, text in pages.items():
            if self.missing(src, text):
                continue  # built as a notice (page()), with no figure
            for ph in self._placeholders(text):
                if ph.kind == "figure" and ph.kw.get("fmt", "svg") == "svg":
                    fig = self.figure(ph, Resolver(self.facts, page_slug(src)), page_lang(src))
                    if fig.path() not in drawn:
                        drawn[fig.path()] = fig.render(self.traces[fig.scenario], "svg")
        sync(docs_dir, drawn)

    @staticmethod
    def _placeholders(text: str) -> list[Placeholder]:
        return [parse(m.group(0)) for m in find(text)]

    # -- one page ---------------------------------------------------------------------------------------
    def figure(self, ph: Placeholder, r: Resolver, lang: str = "en") -> Figure:
        scenario, view = r.need(ph, 2, "a scenario and a view")[:2]
        return Figure(scenario, view, r.str_arg(ph, "rid"), r.int_arg(ph, "round"), "all" in ph.flags,
                      r.str_arg(ph, "server"), lang)

    def page(self, markdown: str, src_uri: str) -> str:
        r, lang = Resolver(self.facts, page_slug(src_uri)), page_lang(src_uri)
        if missing := self.missing(src_uri, markdown):
            return blocks.unavailable_page(markdown, missing, lang)

        def resolve(ph: Placeholder) -> str:
            if ph.kind == "fact":
                from course.facts import show

                return show(r.value("@" + r.need(ph, 1, "a fact name")[0]))
            if ph.kind in ("lab", "labs", "mutants"):
                from course import lab_blocks

                if ph.kind == "mutants":
                    return lab_blocks.mutants_table(lang)
                if ph.kind == "labs":
                    return lab_blocks.labs_table(src_uri, lang)
                return lab_blocks.lab_block(r.need(ph, 1, "a lab name")[0], src_uri, lang)
            if ph.kind == "coverage":
                from course.coverage import coverage_table, summary

                return summary(lang) + "\n\n" + coverage_table(lang)
            if ph.kind == "states":
                return blocks.states_block({n: self.traces[n] for n in r.need(ph, 1, "scenarios")}, lang)
            scenario = r.need(ph, 1, "a scenario")[0]
            if ph.kind == "whatif":
                key, sets, prompts = self.whatif(ph)
                ask = ph.kw.get("ask", "")
                return blocks.whatif_block(scenario, sets, prompts, ask, self.traces[key], lang)
            trace, rid, rnd = self.traces[scenario], r.str_arg(ph, "rid"), r.int_arg(ph, "round")
            if ph.kind == "figure":
                fig = self.figure(ph, r, lang)
                if ph.kw.get("fmt", "svg") == "mermaid":
                    text = str(fig.render(trace, "mermaid")).strip()
                    fit = SEQUENCE_FIT if text.startswith("sequenceDiagram") else ""
                    return "```mermaid\n" + fit + text + "\n```"
                rel = posixpath.relpath(fig.path(), posixpath.dirname(src_uri) or ".")
                return f"![{fig.alt()}]({rel})"
            if ph.kind == "events":
                names = r.str_arg(ph, "names")
                return blocks.events_block(trace, rid, rnd, names.split(",") if names else None,
                                           r.str_arg(ph, "proc"), r.int_arg(ph, "limit"))
            if ph.kind == "rows":
                if rnd is None:
                    raise PlaceholderError("rows needs round=")
                return blocks.rows_table(trace, rnd, lang)
            return blocks.try_block(scenario, rid, rnd, lang)

        def guarded(ph: Placeholder) -> str:
            try:
                return resolve(ph)
            # the trace has no such round, request, ...
            except (ValueError, TraceError, GraphvizMissing) as e:
                raise PlaceholderError(str(e)) from None

        text = render(markdown, guarded)
        return join_soft_breaks(text) if lang == "zh" else text
