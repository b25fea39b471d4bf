"""One trace event as the reader hands it out: the JSONL record plus where it came from and when.

Kept apart from the reader so that replay, check and the exporters share one small, typed record.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class Event:
    """A JSONL record. `time_ns` is wall time (the process's monotonic `ts` aligned by its
    `trace.process_start`); `index` is the event's position in the merged timeline."""

    v: int
    seq: int
    ts: int
    proc: str
    pid: int
    name: str
    ph: str = "i"
    rid: str | None = None
    rids: list[str] | None = None
    round: int | None = None
    thread: str | None = None  # a thread other than the process's main loop (e.g. the forward thread)
    flow_id: str | None = None
    flow_dir: str | None = None
    attrs: dict[str, Any] = field(default_factory=dict)
    time_ns: int = 0
    index: int = -1
    file: str = ""
    line: int = 0

    def get(self, key: str, default: Any = None) -> Any:
        """An attribute of the event (the `attrs` object), with a default when it is absent."""
        return self.attrs.get(key, default)

    @property
    def all_rids(self) -> list[str]:
        """Every request the event is about: `rid`, then `rids`."""
        out = [self.rid] if self.rid is not None else []
        if self.rids:
            out += [r for r in self.rids if r != self.rid]
        return out

    @property
    def lane(self) -> str:
        """The component that emitted it, from the name's prefix: http, tm, sched, kv, cache, model, detok,
        ipc."""
        return self.name.split(".", 1)[0]

    @property
    def where(self) -> str:
        """file:line, for error messages."""
        return f"{self.file}:{self.line}"
