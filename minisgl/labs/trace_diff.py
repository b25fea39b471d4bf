"""Where a learner's trace first leaves the reference: the first normalized event that differs, the fields
that differ in it, and the few events before it that both traces share.

Normalized events (tracer/normalize.py) drop clocks, pids and flow ids, so two runs of the same scenario with
the same components give identical lists; any difference is a different decision by the engine.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from tracer.normalize import LOAD_PROBES, event_line, normalize
from tracer.reader import Trace

CONTEXT = 4  # shared events shown before the divergence
HEAD_KEYS = ("proc", "name", "ph", "round", "rid", "rids")


@dataclass
class Divergence:
    index: int
    expected: dict[str, Any] | None  # None: the learner's trace has an event the reference does not
    got: dict[str, Any] | None  # None: the learner's trace ended early
    fields: list[str] = field(default_factory=list)
    context: list[str] = field(default_factory=list)

    @property
    def round(self) -> int | None:
        for rec in (self.got, self.expected):
            if rec is not None and rec.get("round") is not None:
                return rec["round"]
        return None

    @property
    def rid(self) -> str | None:
        for rec in (self.expected, self.got):
            if rec is not None and isinstance(rec.get("rid"), str):
                return rec["rid"]
        return None

    @property
    def event(self) -> str:
        rec = self.expected or self.got or {}
        return rec.get("name", "?")

    def value(self, rec: dict[str, Any] | None, path: str) -> Any:
        if rec is None:
            return None
        if path.startswith("attrs."):
            return (rec.get("attrs") or {}).get(path[len("attrs."):])
        return rec.get(path)

    def report(self) -> str:
        proc = (self.expected or self.got or {}).get("proc")
        if self.round is not None:
            where = f"round {self.round}"
        elif proc in ("tokenizer_manager", "detokenizer"):  # their events belong to requests, not to rounds
            where = f"the {proc} process"
        else:
            where = "before the first round"
        lines = [f"first divergence: event #{self.index} ({where}), {self.event}"]
        if self.got is None:
            lines.append("  your trace ends here; the reference goes on with:")
            lines.append("    " + event_line(self.expected))
        elif self.expected is None:
            lines.append("  the reference ends here; your trace goes on with:")
            lines.append("    " + event_line(self.got))
        else:
            for f in self.fields:
                lines.append(f"  {f}:")
                lines.append(f"    expected {_show(self.value(self.expected, f))}")
                lines.append(f"    got      {_show(self.value(self.got, f))}")
            lines.append("  expected: " + event_line(self.expected))
            lines.append("  got:      " + event_line(self.got))
        if self.context:
            lines.append("  the events before it (the same in both):")
            lines += ["    " + c for c in self.context]
        return "\n".join(lines)


def _show(v: Any) -> str:
    return json.dumps(v, ensure_ascii=False, sort_keys=True) if v is not None else "(absent)"


def differing_fields(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    out = [k for k in HEAD_KEYS if a.get(k) != b.get(k)]
    aa, bb = a.get("attrs") or {}, b.get("attrs") or {}
    out += [f"attrs.{k}" for k in sorted(set(aa) | set(bb)) if aa.get(k) != bb.get(k)]
    return out


def graded(trace: Trace) -> list[dict[str, Any]]:
    """The normalized events a grade compares: all but the load polls (GetLoadReq and its reply), which a
    scenario's client sends to /health while it waits for the server, as often as the clock decides."""
    return [rec for rec in normalize(trace) if (rec.get("attrs") or {}).get("msg") not in LOAD_PROBES]


def first_divergence(expected: Trace, got: Trace) -> Divergence | None:
    """None when the graded events are equal."""
    exp, mine = graded(expected), graded(got)
    for i in range(max(len(exp), len(mine))):
        a = exp[i] if i < len(exp) else None
        b = mine[i] if i < len(mine) else None
        if a == b:
            continue
        context = [event_line(rec) for rec in exp[max(0, i - CONTEXT):i]]
        return Divergence(i, a, b, differing_fields(a, b) if a and b else [], context)
    return None
