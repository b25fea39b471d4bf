"""Read a trace folder: every `*.jsonl` file, merged into one timeline on a shared wall clock.

Each process stamps events with the machine's monotonic clock; its `trace.process_start` event records
that clock and the wall clock at one instant, which is enough to put all processes on one time axis. The
processes of one run share that instant (`tracer.api.clock_anchor`), so their events order exactly.
`TraceTail` reads a folder that a running server is still writing, a few lines at a time.
"""

from __future__ import annotations

import bisect
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracer.api import SCHEMA_VERSION
from tracer.event import Event
from tracer.tp_ranks import split_tp_ranks

REQUIRED = ("v", "seq", "ts", "proc", "pid", "name")
ROUND_EVENTS = ("sched.batch_formed", "sched.round_end")
# version 2 only added events and fields, so a version 1 trace reads as one that lacks them
READABLE_VERSIONS = (1, SCHEMA_VERSION)


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

    def __init__(self, folder: Path, events: list[Event], processes: list[ProcessInfo], warnings: list[str],
                 tp_rank_events: dict[str, list[Event]] | None = None):
        self.folder = folder
        self.events = events
        # tensor parallelism: ranks 1..N-1's scheduler events, kept beside the timeline (tracer/tp_ranks.py)
        self.tp_rank_events: dict[str, list[Event]] = tp_rank_events or {}
        self.warnings = warnings  # e.g. a torn last line that was skipped
        # what readers derive from the events (replay's checkpoints); extend clears it
        self.cache: dict[str, Any] = {}
        self._processes = processes
        self._index(0)

    def _index(self, start: int) -> None:
        """(Re)build the by-request and by-round indexes from events[start:] on (0: from scratch)."""
        if start == 0:
            self._by_rid: dict[str, list[Event]] = {}
            self._by_round: dict[int, list[Event]] = {}
            self._round_set: set[int] = set()
        for ev in self.events[start:]:
            for rid in ev.all_rids:
                self._by_rid.setdefault(rid, []).append(ev)
            if ev.round is not None:
                self._by_round.setdefault(ev.round, []).append(ev)
                if ev.name in ROUND_EVENTS:
                    self._round_set.add(ev.round)
        self._rounds = sorted(self._round_set)

    def extend(self, events: list[Event], processes: list[ProcessInfo] | None = None) -> int:
        """Merge events read later (from a trace still being written) into the timeline. Returns the index
        of the first event whose place changed: events before it keep their index; those after it may move,
        since another process's late line can belong earlier on the clock."""
        if processes is not None:
            self._processes = processes
        events, ranks = split_tp_ranks(events)
        for proc, evs in ranks.items():
            self.tp_rank_events.setdefault(proc, []).extend(evs)
        if not events:
            return len(self.events)
        new = sorted(events, key=_order)
        start = bisect.bisect_right(self.events, _order(new[0]), key=_order)
        tail = self.events[start:]
        self.events[start:] = sorted(tail + new, key=_order) if tail else new
        for i in range(start, len(self.events)):
            self.events[i].index = i
        self._index(start if not tail else 0)  # events moved: rebuild, so each list stays in timeline order
        self.cache.clear()
        return start

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
    folder = _check_folder(folder)
    files = sorted(folder.glob("*.jsonl"))
    if not files:
        raise TraceError(f"trace folder {folder} has no *.jsonl files")
    events: list[Event] = []
    processes: list[ProcessInfo] = []
    warnings: list[str] = []
    for path in files:
        reader = _FileReader(path)
        file_events, warning = reader.read(final=True)
        events += file_events
        if reader.info is not None:
            processes.append(reader.info)
        if warning:
            warnings.append(warning)
    if not events:
        raise TraceError(f"trace folder {folder} has no events (every *.jsonl file is empty)")
    events, tp_rank_events = split_tp_ranks(events)
    events.sort(key=_order)
    for i, ev in enumerate(events):
        ev.index = i
    return Trace(folder, events, processes, warnings, tp_rank_events)


class TraceTail:
    """A trace folder that a running server is still writing. `poll()` reads the whole lines appended
    since the last poll (a half-written last line waits for the next one) and merges them into `trace`.
    An existing folder without events yet is fine: a server writes its first lines as it starts."""

    def __init__(self, folder: str | Path, dp_rank: int = 0):
        self.folder = _check_folder(folder)
        self.dp_rank = dp_rank  # a --dp-size trace: read only this scheduler rank's file (tracer/dp_ranks.py)
        self.trace = Trace(self.folder, [], [], [])
        self._files: dict[Path, _FileReader] = {}

    def poll(self) -> int | None:
        """Read what was appended. Returns the index of the first event that changed (see Trace.extend),
        or None when nothing new was there."""
        from tracer.dp_ranks import keeps
        from tracer.schema import DP_SCHEDULER_PREFIX

        new: list[Event] = []
        for path in sorted(self.folder.glob("*.jsonl")):
            reader = self._files.setdefault(path, _FileReader(path))
            events = reader.read(final=False)[0]
            if reader.info is None or keeps(reader.info.proc, f"{DP_SCHEDULER_PREFIX}{self.dp_rank}"):
                new += events
        if not new:
            return None
        processes = [r.info for r in self._files.values()
                     if r.info is not None and keeps(r.info.proc, f"{DP_SCHEDULER_PREFIX}{self.dp_rank}")]
        return self.trace.extend(new, sorted(processes, key=lambda p: p.file))


def _check_folder(folder: str | Path) -> Path:
    folder = Path(folder)
    if not folder.exists():
        raise TraceError(f"trace folder {folder} does not exist")
    if not folder.is_dir():
        raise TraceError(f"{folder} is not a folder (a trace is a folder of *.jsonl files)")
    return folder


def _order(ev: Event) -> tuple[int, int, int]:
    """Timeline order: wall time, ties broken by process id and sequence number."""
    return ev.time_ns, ev.pid, ev.seq


class _FileReader:
    """One process's file, read on from where the last read stopped, with its clock offset (wall_ns - mono_ns
    of the latest trace.process_start) and line count carried between reads."""

    def __init__(self, path: Path):
        self.path = path
        self.info: ProcessInfo | None = None
        self._pos = 0  # bytes consumed
        self._lineno = 0
        self._offset: int | None = None
        self._count = 0

    def read(self, final: bool) -> tuple[list[Event], str | None]:
        """The events of the lines not read yet. final: the file is complete, so a torn last line is
        skipped with a warning; otherwise a last line without its newline is left for the next read."""
        try:
            with self.path.open("rb") as f:
                f.seek(self._pos)
                data = f.read()
        except OSError as e:
            raise TraceError(f"cannot read {self.path}: {e}") from None
        if not final:
            data = data[: data.rfind(b"\n") + 1]  # whole lines only
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise TraceError(f"cannot read {self.path}: {e}") from None
        self._pos += len(data)
        lines = text.split("\n")
        if text.endswith("\n"):
            lines.pop()  # the empty string after the last newline
        torn_tail = final and bool(text) and not text.endswith("\n")  # a writer killed mid-line
        events: list[Event] = []
        warning = None
        for i, line in enumerate(lines):
            self._lineno += 1
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                if torn_tail and i == len(lines) - 1:
                    warning = f"{self.path.name}:{self._lineno}: skipped a torn last line ({len(line)} chars)"
                    break
                raise TraceError(f"{self.path}:{self._lineno}: corrupt line, not JSON ({e.msg} at column "
                                 f"{e.colno})") from None
            events.append(self._align(_to_event(record, self.path, self._lineno)))
        self._count += len(events)
        if self.info is not None:
            self.info = ProcessInfo(self.info.proc, self.info.pid, self.info.file, self.info.wall_ns,
                                    self.info.mono_ns, self.info.level, self._count)
        return events, warning

    def _align(self, ev: Event) -> Event:
        if ev.name == "trace.process_start":
            self._offset = int(ev.get("wall_ns")) - int(ev.get("mono_ns"))
            if self.info is None:
                self.info = ProcessInfo(ev.proc, ev.pid, self.path.name, int(ev.get("wall_ns")),
                                        int(ev.get("mono_ns")), int(ev.get("level", 0)), 0)
        if self._offset is None:
            raise TraceError(f"{self.path}:{self._lineno}: event {ev.name!r} comes before the file's "
                             "trace.process_start, so its clock cannot be aligned")
        ev.time_ns = ev.ts + self._offset
        return ev


def _to_event(record: Any, path: Path, lineno: int) -> Event:
    where = f"{path}:{lineno}"
    if not isinstance(record, dict):
        raise TraceError(f"{where}: corrupt line, an event must be a JSON object")
    v = record.get("v")
    if v not in READABLE_VERSIONS:
        known = " and ".join(map(str, READABLE_VERSIONS))
        raise TraceError(f"{where}: trace schema version {v!r} is not supported (this reader knows "
                         f"versions {known}); read it with the minisgl that wrote it")
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
            round=record.get("round"), thread=record.get("thread"), flow_id=flow.get("id"),
            flow_dir=flow.get("dir"), attrs=attrs,
            file=path.name, line=lineno,
        )
    except (TypeError, ValueError) as e:
        raise TraceError(f"{where}: corrupt event, {e}") from None
