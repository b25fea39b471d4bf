"""Read a trace folder: every `*.jsonl` file, merged into one timeline on a shared wall clock.

Each process stamps events with its own monotonic clock; its `trace.process_start` event records that
clock and the wall clock at one instant, which is enough to put all processes on one time axis.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracer.api import SCHEMA_VERSION
from tracer.event import Event

REQUIRED = ("v", "seq", "ts", "proc", "pid", "name")
ROUND_EVENTS = ("sched.batch_formed", "sched.round_end")


class TraceError(Exception):
    """A trace that cannot be read: missing folder, corrupt line, unknown schema version."""


@dataclass(frozen=True)
class ProcessInfo:
    """One process of the trace, as its `trace.process_start` event describes it."""

    proc: str
    pid: int
    file: str
    wall_ns: int
    mono_ns: int
    level: int
    num_events: int


class Trace:
    """The merged events of a trace folder, with indexes by request and by round."""

    def __init__(self, folder: Path, events: list[Event], processes: list[ProcessInfo], warnings: list[str]):
        self.folder = folder
        self.events = events
        self.warnings = warnings  # e.g. a torn last line that was skipped
        self._processes = processes
        self._by_rid: dict[str, list[Event]] = {}
        self._by_round: dict[int, list[Event]] = {}
        for ev in events:
            for rid in ev.all_rids:
                self._by_rid.setdefault(rid, []).append(ev)
            if ev.round is not None:
                self._by_round.setdefault(ev.round, []).append(ev)
        self._rounds = sorted({ev.round for ev in events if ev.name in ROUND_EVENTS and ev.round is not None})

    @property
    def level(self) -> int:
        """The highest trace level of any process (1 requests, 2 tokens, 3 tensors)."""
        return max((p.level for p in self._processes), default=0)

    @property
    def start_ns(self) -> int:
        return self.events[0].time_ns if self.events else 0

    def by_rid(self, rid: str) -> list[Event]:
        """Every event about `rid` (as `rid` or in `rids`), in timeline order."""
        return list(self._by_rid.get(rid, []))

    def rids(self) -> list[str]:
        """Every request id, in order of first appearance."""
        return list(self._by_rid)

    def rounds(self) -> list[int]:
        """The numbers of the scheduler rounds that formed a batch or ended, ascending."""
        return list(self._rounds)

    def events_in_round(self, n: int) -> list[Event]:
        """The events stamped with round `n` (scheduler-side events; other processes carry no round)."""
        return list(self._by_round.get(n, []))

    def processes(self) -> list[ProcessInfo]:
        return list(self._processes)

    def __len__(self) -> int:
        return len(self.events)


def load_trace(folder: str | Path) -> Trace:
    """Read and merge every `*.jsonl` file of `folder`. Raises TraceError with a one-line reason."""
    folder = Path(folder)
    if not folder.exists():
        raise TraceError(f"trace folder {folder} does not exist")
    if not folder.is_dir():
        raise TraceError(f"{folder} is not a folder (a trace is a folder of *.jsonl files)")
    files = sorted(folder.glob("*.jsonl"))
    if not files:
        raise TraceError(f"trace folder {folder} has no *.jsonl files")
    events: list[Event] = []
    processes: list[ProcessInfo] = []
    warnings: list[str] = []
    for path in files:
        file_events, info, warning = _read_file(path)
        events += file_events
        if info is not None:
            processes.append(info)
        if warning:
            warnings.append(warning)
    if not events:
        raise TraceError(f"trace folder {folder} has no events (every *.jsonl file is empty)")
    events.sort(key=lambda e: (e.time_ns, e.pid, e.seq))
    for i, ev in enumerate(events):
        ev.index = i
    return Trace(folder, events, processes, warnings)


def _read_file(path: Path) -> tuple[list[Event], ProcessInfo | None, str | None]:
    """One process's events, aligned to wall time. A torn last line is skipped with a warning."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise TraceError(f"cannot read {path}: {e}") from None
    lines = text.split("\n")
    torn_tail = not text.endswith("\n")  # a writer still writing, or killed mid-line
    events: list[Event] = []
    warning = None
    offset: int | None = None  # wall_ns - mono_ns of the latest trace.process_start
    info: ProcessInfo | None = None
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        is_last = lineno == len(lines)
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            if is_last and torn_tail:
                warning = f"{path.name}:{lineno}: skipped a torn last line ({len(line)} chars)"
                break
            raise TraceError(f"{path}:{lineno}: corrupt line, not JSON ({e.msg} at column {e.colno})") \
                from None
        ev = _to_event(record, path, lineno)
        if ev.name == "trace.process_start":
            offset = int(ev.get("wall_ns")) - int(ev.get("mono_ns"))
            if info is None:
                info = ProcessInfo(ev.proc, ev.pid, path.name, int(ev.get("wall_ns")), int(ev.get("mono_ns")),
                                   int(ev.get("level", 0)), 0)
        if offset is None:
            raise TraceError(f"{path}:{lineno}: event {ev.name!r} comes before the file's "
                             "trace.process_start, so its clock cannot be aligned")
        ev.time_ns = ev.ts + offset
        events.append(ev)
    if info is not None:
        info = ProcessInfo(info.proc, info.pid, info.file, info.wall_ns, info.mono_ns, info.level,
                           len(events))
    return events, info, warning


def _to_event(record: Any, path: Path, lineno: int) -> Event:
    where = f"{path}:{lineno}"
    if not isinstance(record, dict):
        raise TraceError(f"{where}: corrupt line, an event must be a JSON object")
    v = record.get("v")
    if v != SCHEMA_VERSION:
        raise TraceError(f"{where}: trace schema version {v!r} is not supported (this reader knows "
                         f"version {SCHEMA_VERSION}); read it with the minisgl that wrote it")
    missing = [k for k in REQUIRED if k not in record]
    if missing:
        raise TraceError(f"{where}: corrupt event, missing field(s) {', '.join(missing)}")
    attrs = record.get("attrs") or {}
    flow = record.get("flow") or {}
    if not isinstance(attrs, dict) or not isinstance(flow, dict):
        raise TraceError(f"{where}: corrupt event, attrs and flow must be JSON objects")
    try:
        return Event(
            v=v, seq=int(record["seq"]), ts=int(record["ts"]), proc=str(record["proc"]),
            pid=int(record["pid"]), name=str(record["name"]), ph=str(record.get("ph", "i")),
            rid=record.get("rid", attrs.get("rid") if isinstance(attrs.get("rid"), str) else None),
            rids=record.get("rids", attrs.get("rids") if isinstance(attrs.get("rids"), list) else None),
            round=record.get("round"), flow_id=flow.get("id"), flow_dir=flow.get("dir"), attrs=attrs,
            file=path.name, line=lineno,
        )
    except (TypeError, ValueError) as e:
        raise TraceError(f"{where}: corrupt event, {e}") from None
