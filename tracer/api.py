"""The emit API. One process-wide `tracer`; disabled it costs one attribute check at each call site.

Call sites guard with the flag, so that nothing is formatted or allocated when tracing is off:

    if tracer.enabled:
        tracer.event("sched.enqueued", rid=req.rid, queue_len=len(self.waiting_queue))

Levels: 1 requests and rounds; 2 adds per-token events; 3 adds full per-row tensors.
"""

from __future__ import annotations

import atexit
import itertools
import json
import os
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tracer.schema import LEVEL_REQUESTS, LEVEL_TENSORS, LEVEL_TOKENS, SCHEMA_VERSION

# the levels and the version live in tracer.schema; emitters import them from here too
__all__ = ["LEVEL_REQUESTS", "LEVEL_TENSORS", "LEVEL_TOKENS", "SCHEMA_VERSION", "Tracer", "clock_anchor",
           "tracer"]
# "boot_id:wall_ns:mono_ns", handed to child processes through the environment
CLOCK_ENV = "MINISGL_TRACE_CLOCK"


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def clock_anchor() -> tuple[int, int]:
    """(wall_ns, mono_ns) read at one instant, the same for every process of one run.

    The monotonic clock is one clock for the whole machine, so events of different processes order
    exactly by it. Wall time is only for display. If each process paired the two clocks itself, the
    pairs would differ by the microseconds between the two reads (and by any wall-clock adjustment
    between process starts), enough to put a reply before the message that caused it. So the first
    process to trace takes the pair and leaves it in the environment, which the processes it starts
    inherit; a pair left by an earlier boot of the machine is not reused.
    """
    boot = _boot_id()
    parts = os.environ.get(CLOCK_ENV, "").split(":")
    if len(parts) == 3 and parts[0] == boot and parts[1].isdigit() and parts[2].isdigit():
        return int(parts[1]), int(parts[2])
    wall_ns, mono_ns = time.time_ns(), time.monotonic_ns()
    os.environ[CLOCK_ENV] = f"{boot}:{wall_ns}:{mono_ns}"
    return wall_ns, mono_ns


class Tracer:
    def __init__(self) -> None:
        self.enabled = False
        self.level = 0
        self.process = ""
        self.round: int | None = None  # the scheduler round events belong to, when there is one
        self._file = None
        self._seq = itertools.count()
        self._flow = itertools.count(1)
        self._pid = 0
        # the TokenizerManager emits from its tokenizer thread too: seq, ts and the line's place in the file
        # are taken together, so the file stays in seq order
        self._lock = threading.Lock()
        # a thread other than the process's main loop (the overlap scheduler's forward thread) names itself
        # and the round it works on: its events carry `thread` and that round, not the main loop's
        self._local = threading.local()

    # ---- set-up -----------------------------------------------------------------------------------
    def configure(self, trace_dir: str | os.PathLike, process: str, level: int = LEVEL_TOKENS) -> Path:
        """Start writing this process's events to TRACE_DIR/<process>-<pid>.jsonl."""
        if not 1 <= level <= 3:
            raise ValueError(f"trace level must be 1, 2 or 3, not {level}")
        self.close()
        folder = Path(trace_dir)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{process}-{os.getpid()}.jsonl"
        self._file = open(path, "a", encoding="utf-8", buffering=1 << 16)
        self.process, self.level, self.enabled = process, level, True
        # a new trace starts before any round (an earlier engine in this process left its own)
        self.round = None
        self._seq, self._flow, self._pid = itertools.count(), itertools.count(1), os.getpid()
        # both clocks at one instant, shared with the child processes: the reader aligns monotonic time with
        # it
        wall_ns, mono_ns = clock_anchor()
        self.event("trace.process_start", wall_ns=wall_ns, mono_ns=mono_ns, schema=SCHEMA_VERSION,
                   level=level)
        atexit.register(self.close)
        return path

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.flush()
                self._file.close()
                self._file = None
            self.enabled = False

    def flush(self) -> None:
        """Called at the end of every scheduler round, so a reader tailing the files sees whole rounds."""
        if self._file is not None:
            self._file.flush()

    # ---- emitting ---------------------------------------------------------------------------------
    def event(self, name: str, *, rid: str | None = None, rids: list[str] | None = None,
              flow: str | None = None, flow_dir: str | None = None, ph: str = "i", **attrs: Any) -> None:
        """One event. ph: "i" instant, "B"/"E" span begin/end. flow pairs a send with its receive."""
        with self._lock:
            if self._file is None:
                return
            record: dict[str, Any] = {
                "v": SCHEMA_VERSION, "seq": next(self._seq), "ts": time.monotonic_ns(), "proc": self.process,
                "pid": self._pid, "name": name, "ph": ph,
            }
            if rid is not None:
                record["rid"] = rid
            if rids is not None:
                record["rids"] = rids
            thread = getattr(self._local, "thread", None)
            round_ = self._local.round if thread is not None else self.round
            if round_ is not None:
                record["round"] = round_
            if thread is not None:
                record["thread"] = thread
            if flow is not None:
                record["flow"] = {"id": flow, "dir": flow_dir}
            if attrs:
                record["attrs"] = attrs
            self._file.write(_encode(record) + "\n")

    def begin(self, name: str, **kw: Any) -> None:
        self.event(name, ph="B", **kw)

    def end(self, name: str, **kw: Any) -> None:
        self.event(name, ph="E", **kw)

    @contextmanager
    def on_thread(self, thread: str, round: int | None):
        """Events emitted by this thread inside the block carry `thread` and `round` (this thread only)."""
        self._local.thread, self._local.round = thread, round
        try:
            yield
        finally:
            self._local.thread = self._local.round = None

    @property
    def thread(self) -> str | None:
        """The name the calling thread gave itself with on_thread, or None (the main loop)."""
        return getattr(self._local, "thread", None)

    def new_flow_id(self) -> str:
        """A flow id unique across processes: the sender's pid and a counter."""
        return f"{self._pid or os.getpid()}:{next(self._flow)}"


def _jsonable(obj: Any) -> Any:
    if hasattr(obj, "tolist"):  # tensors and numpy arrays
        return obj.tolist()
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    return str(obj)


# one encoder for every event: json.dumps with options builds a new JSONEncoder on each call
_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=_jsonable).encode

tracer = Tracer()
