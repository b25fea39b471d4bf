"""The placeholders a lesson page's Markdown may hold, and how each becomes Markdown at build time.

    {{ fact NAME }}                       a fact (see facts.py): `extend_rows`, `shared_prefix:config.kv_size`
    {{ figure SCEN VIEW rid=R2 round=@n }}  a tracer diagram as SVG (fmt=mermaid: a mermaid block)
    {{ events SCEN rid=R2 round=@n names=sched.admission,kv.alloc limit=6 }}   a trace excerpt
    {{ rows SCEN round=@n }}              a round's batch, one table row per token row
    {{ try SCEN rid=R2 round=@n }}        the commands that run, replay and draw it yourself
    {{ whatif SCEN set=chunked_prefill_size=12,L.max_new_tokens=6 prompt='R2= red' ask="..." }}
                                          a transfer question: the `--set` command that answers it, and
                                          (folded) what that changed run did, run at build time
    {{ lab NAME }}                        the lab that builds this lesson's component (a "Build it" block)
    {{ labs }}                            every lab, as a table (the labs page)
    {{ mutants }}                         each lab's measured mutation run, as a table (the labs page)
    {{ states SCEN SCEN ... }}            a request's states and the events between them, read off those
                                          scenarios' traces: a state diagram and a table
    {{ coverage }}                        the syllabus's concepts and where each is implemented, shown,
                                          taught, tested and practised (coverage.py; the coverage page)

An argument `@name` is the page's fact `name`; every other number on a page is refused by the tests, but
for whatif's `set=` and `prompt=`: the changed inputs of a run the build makes.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from typing import Any

from course.facts import FactError, Facts, show

PLACEHOLDER = re.compile(r"\{\{\s*(?P<kind>[a-z]+)(?P<args>(?:[^}]|\}(?!\}))*)\}\}")
KINDS = ("fact", "figure", "events", "rows", "try", "whatif", "lab", "labs", "mutants", "states", "coverage")


class PlaceholderError(ValueError):
    pass


@dataclass
class Placeholder:
    kind: str
    pos: list[str]
    kw: dict[str, str] = field(default_factory=dict)
    flags: set[str] = field(default_factory=set)
    text: str = ""


def parse(text: str) -> Placeholder:
    m = PLACEHOLDER.fullmatch(text.strip())
    if m is None or m["kind"] not in KINDS:
        raise PlaceholderError(f"not a placeholder: {text!r} (kinds: {', '.join(KINDS)})")
    ph = Placeholder(m["kind"], [], text=text)
    try:
        words = shlex.split(m["args"])
    except ValueError as e:
        raise PlaceholderError(f"{text!r}: {e}") from None
    for w in words:
        if "=" in w:
            k, _, v = w.partition("=")
            ph.kw[k] = v
        elif w == "all" and ph.kind == "figure":
            ph.flags.add(w)  # every round
        else:
            ph.pos.append(w)
    return ph


def find(markdown: str) -> list[re.Match]:
    return list(PLACEHOLDER.finditer(markdown))


class Resolver:
    """Turns one page's placeholders into Markdown, with its facts (`@name`) and the figure maker."""

    def __init__(self, facts: Facts, slug: str) -> None:
        self.facts, self.slug = facts, slug

    def value(self, raw: str) -> Any:
        if raw.startswith("@"):
            return self.facts.lookup(self.slug, raw[1:])
        return raw

    def int_arg(self, ph: Placeholder, key: str) -> int | None:
        if key not in ph.kw:
            return None
        v = self.value(ph.kw[key])
        try:
            return int(v)
        except (TypeError, ValueError):
            raise PlaceholderError(f"{ph.text}: {key}={v!r} is not a whole number") from None

    def str_arg(self, ph: Placeholder, key: str) -> str | None:
        return None if key not in ph.kw else show(self.value(ph.kw[key]))

    def need(self, ph: Placeholder, n: int, what: str) -> list[str]:
        if len(ph.pos) < n:
            raise PlaceholderError(f"{ph.text}: expected {what}")
        return ph.pos


def render(markdown: str, resolve) -> str:
    """Each placeholder replaced by resolve(Placeholder) -> str; errors name the placeholder."""

    def one(m: re.Match) -> str:
        ph = parse(m.group(0))
        try:
            return resolve(ph)
        except (FactError, PlaceholderError) as e:
            raise PlaceholderError(f"{m.group(0)}: {e}") from None

    return PLACEHOLDER.sub(one, markdown)
