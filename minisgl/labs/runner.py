"""Run one scenario with the lab's component swapped in (a child process of `minisgl lab grade`), and write
what happened to a small JSON report: ok, or the swap's error, or the learner's traceback and the round."""

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
    scenario, trace_dir, report = argv
    from minisgl.labs.swap import LabSwapError, apply_from_env
    from minisgl.scenarios import get
    from minisgl.scenarios.driver import run

    out: dict = {"ok": True}
    try:
        apply_from_env()
        run(get(scenario), trace_dir)
    except LabSwapError as e:
        out = {"ok": False, "kind": "swap", "message": str(e)}
    except Exception as e:  # the learner's code raised inside the engine
        out = {"ok": False, "kind": "crash", "message": f"{type(e).__name__}: {e}",
               "traceback": traceback.format_exc(), "round": current_round(trace_dir)}
    Path(report).write_text(json.dumps(out), encoding="utf-8")
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
