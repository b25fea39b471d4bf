"""Merged traces of several servers (`minisgl trace merge`): a prefill/decode pair, each server a trace
folder.

merge_traces copies every process file of each folder into one folder, its process named `<server>/<proc>`
(prefill/scheduler, decode/tokenizer_manager …). The processes of one machine share its clocks, and processes
of two machines their wall clocks, so the reader merges them on one time axis as it does one server's files;
a request the router paired keeps one rid on both servers (`pd-<room>`), so its events from both sit together.
Each server keeps its own rounds and KV pool: check, replay and the round views take one server's view
(server_view: its events, process names as they were), while a request's lifecycle may span both.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from tracer.reader import Trace, TraceError

SEP = "/"  # between a server's name and its process's in a merged trace


def merge_traces(folders: list[Path], names: list[str], out: Path) -> int:
    """Write the merged trace of `folders` (server `names[i]`) into `out`; returns the number of events."""
    if len(set(names)) != len(names) or any(not n or SEP in n for n in names):
        raise TraceError(f"server names must be distinct and without {SEP!r}: {names}")
    out.mkdir(parents=True, exist_ok=True)
    if any(out.glob("*.jsonl")):
        raise TraceError(f"{out} already holds a trace: merge into a new folder")
    count = 0
    for folder, name in zip(folders, names):
        files = sorted(Path(folder).glob("*.jsonl"))
        if not files:
            raise TraceError(f"trace folder {folder} has no *.jsonl files")
        for path in files:
            lines = []
            for line in path.read_text(encoding="utf-8").splitlines():
                if not line.strip():
                    continue
                record = json.loads(line)
                if SEP in str(record.get("proc", "")):
                    raise TraceError(f"{path} is already a merged trace's file")
                record["proc"] = f"{name}{SEP}{record['proc']}"
                lines.append(json.dumps(record, separators=(",", ":")))
            (out / f"{name}-{path.name}").write_text("\n".join(lines) + "\n", encoding="utf-8")
            count += len(lines)
    return count


def server_names(trace: Trace) -> list[str]:
    """The servers of a merged trace, by name; [] for one server's trace."""
    return sorted({p.proc.split(SEP, 1)[0] for p in trace.processes() if SEP in p.proc})


def server_view(trace: Trace, name: str, reindex: bool = True) -> Trace:
    """One server's trace out of a merged one: its events and processes, with their own process names.
    reindex=False keeps each event's index in the merged timeline (to draw both servers on one timeline)."""
    prefix = name + SEP
    events = [dataclasses.replace(ev, proc=ev.proc[len(prefix):]) for ev in trace.events
              if ev.proc.startswith(prefix)]
    for i, ev in enumerate(events):
        ev.index = i if reindex else ev.index
    processes = [dataclasses.replace(p, proc=p.proc[len(prefix):]) for p in trace.processes()
                 if p.proc.startswith(prefix)]
    return Trace(trace.folder, events, processes, list(trace.warnings))


def pick_server(trace: Trace, name: str | None) -> Trace:
    """A merged trace: the view of server `name` (default: `decode` if there is one, else the first by name);
    one server's trace: itself. Raises ValueError for a server the trace does not have."""
    names = server_names(trace)
    if not names:
        if name is not None:
            raise ValueError(f"--server {name}: the trace is one server's, not a merged one")
        return trace
    if name is None:
        return server_view(trace, "decode" if "decode" in names else names[0])
    if name not in names:
        raise ValueError(f"the merged trace has servers {', '.join(names)}, not {name}")
    return server_view(trace, name)
