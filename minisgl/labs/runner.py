"""Run a lab's grading scenarios with the lab's component swapped in (a child process of `minisgl lab grade`),
each into TRACE_ROOT/<scenario>, and write what happened to a small JSON report: ok, or the swap's error, or
the learner's traceback with the scenario and round it happened in.

    python -m minisgl.labs.runner TRACE_ROOT REPORT SCENARIO [SCENARIO ...]

The offline scenarios share one loaded model (each runs on a fork of it, as the course's reference traces
do); a scenario about HTTP starts its own server."""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path


def current_round(trace_dir: str) -> int | None:
    """The round the engine was in when it stopped: the highest round any event of the trace carries."""
    try:
        from tracer.reader import load_trace

        rounds = [ev.round for ev in load_trace(trace_dir).events if ev.round is not None]
        return max(rounds) if rounds else None
    except Exception:  # no trace, or a cut one: the round is unknown
        return None


def main(argv: list[str]) -> int:
    trace_root, report, *scenarios = argv
    from minisgl.labs.swap import LabSwapError, apply_from_env
    from minisgl.scenarios import get
    from minisgl.scenarios.driver import run

    out: dict = {"ok": True, "ran": []}
    loaded = None
    name = None
    try:
        apply_from_env()
        for name in scenarios:
            sc = get(name)
            if sc.server is None and loaded is None:
                from minisgl.entrypoints.engine import Engine

                loaded = Engine(dtype="float32", max_total_tokens=4096, max_running_requests=32)
            run(sc, str(Path(trace_root) / name), loaded=loaded if sc.server is None else None)
            out["ran"].append(name)
    except LabSwapError as e:
        out = {"ok": False, "kind": "swap", "message": str(e), "ran": []}
    except Exception as e:  # the learner's code raised inside the engine
        out = {"ok": False, "kind": "crash", "message": f"{type(e).__name__}: {e}", "scenario": name,
               "traceback": traceback.format_exc(), "round": current_round(str(Path(trace_root) / name)),
               "ran": out["ran"]}
    finally:
        if loaded is not None:
            loaded.shutdown()
    Path(report).write_text(json.dumps(out), encoding="utf-8")
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
