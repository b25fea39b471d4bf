"""The named numbers and words a lesson page may quote, each computed from a scenario trace.

Two kinds of name:
- `scenario:key`, the same on every page: `config.NAME` (a `sched.config` field: kv_size,
  chunked_prefill_size, ...), `rounds` (the last round), `requests` (how many the scheduler received),
  `tokens.RID` (how many tokens RID got),
  `output.RID` (RID's decoded text, quoted), `input_len.RID`, `cached_tokens.RID`.
- a plain `key`: the page's own fact, from `course/page_facts/<page>.py` (`facts(traces) -> dict`).

A value is shown as text: an int as digits, a list joined by ", ", a string as it is.
"""

from __future__ import annotations

import importlib
import json
from typing import Any

from course.traces import CourseTraces
from tracer.reader import Trace


class FactError(LookupError):
    pass


def page_module(slug: str):
    """The facts module of a lesson page (`lessons/radix-cache.md` -> course.page_facts.radix_cache), or
    None."""
    name = "course.page_facts." + slug.replace("-", "_")
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name != name:
            raise
        return None


def show(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        return ", ".join(show(v) for v in value)
    return str(value)


def _last(trace: Trace, name: str, rid: str):
    found = [ev for ev in trace.by_rid(rid) if ev.name == name]
    if not found:
        raise FactError(f"request {rid} has no {name} event")
    return found[-1]


def scenario_fact(trace: Trace, key: str) -> Any:
    head, _, arg = key.partition(".")
    if head == "config":
        ev = next((e for e in trace.events if e.name == "sched.config"), None)
        if ev is None or arg not in ev.attrs:
            raise FactError(f"sched.config has no field {arg!r}")
        return ev.attrs[arg]
    if head == "rounds":
        return trace.rounds()[-1]
    if head == "requests":
        return len({ev.rid for ev in trace.events if ev.name == "sched.req_created"})
    if head == "tokens":
        return _last(trace, "sched.output_appended", arg).get("output_len")
    if head == "input_len":
        return _last(trace, "sched.req_created", arg).get("input_len")
    if head == "cached_tokens":
        return _last(trace, "sched.finished", arg).get("cached_tokens")
    if head == "output":
        deltas = [ev.get("delta") or "" for ev in trace.by_rid(arg) if ev.name == "detok.decoded"]
        return json.dumps("".join(deltas), ensure_ascii=False)
    raise FactError(f"unknown scenario fact {key!r} (config.NAME, rounds, requests, tokens.RID, output.RID, "
                    "input_len.RID, cached_tokens.RID)")


class Facts:
    """lookup(page, name): a fact's value; each page's facts are computed once per build."""

    def __init__(self, traces: CourseTraces) -> None:
        self.traces = traces
        self._pages: dict[str, dict[str, Any]] = {}

    def scenarios_of(self, slug: str) -> tuple[str, ...]:
        mod = page_module(slug)
        return tuple(getattr(mod, "SCENARIOS", ())) if mod else ()

    def of_page(self, slug: str) -> dict[str, Any]:
        if slug not in self._pages:
            mod = page_module(slug)
            self._pages[slug] = dict(mod.facts(self.traces)) if mod else {}
        return self._pages[slug]

    def lookup(self, slug: str, name: str) -> Any:
        if ":" in name:
            scenario, _, key = name.partition(":")
            return scenario_fact(self.traces[scenario], key)
        page = self.of_page(slug)
        if name not in page:
            known = ", ".join(sorted(page)) or "none"
            raise FactError(f"page {slug!r} has no fact {name!r} (its facts: {known})")
        return page[name]
