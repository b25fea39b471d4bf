"""Replay (TUI): time to open a trace and to step through it, at 1k, 10k and 100k events.

    python benchmarks/bench_replay.py                 # 1k, 10k and 100k events
    python benchmarks/bench_replay.py --sizes 1000 10000 --steps 100
    python benchmarks/bench_replay.py --with-tracer-replay   # also time tracer.replay.replay() (slow at 100k)

Traces are synthesized from tests/tracer/fixtures/engine_two_requests (two requests sharing a prefix, a
chunked prompt, a retraction, an eviction) played again and again: each copy has its own rids, rounds
and flow ids, and a `kv.free` (flush) plus an empty `cache.tree` between copies returns the pool. Every
synthesized trace, the largest included, must pass `minisgl trace check` before it is timed. A long trace is thus many short requests one after another:
the state the replay carries (every request seen so far) grows with the trace, as on a long-running server.

Measured, per size: `load_trace`; opening the app headless (index, first frame, every pane mounted);
stepping one event forward (the app's own work per key, `action_step`, and a key press as the Pilot sends
it, drawing included); a round step; the first jump to the end (replays the whole trace once) and steps
back from there (restored from the nearest checkpoint). Times are wall-clock medians.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tracer.check import check_trace
from tracer.reader import load_trace
from tracer.replay import replay

FIXTURE = ROOT / "tests" / "tracer" / "fixtures" / "engine_two_requests" / "engine-4242.jsonl"


def synthesize(folder: Path, n_events: int) -> int:
    """Write a trace of at least n_events events (whole copies of the fixture) to folder; returns its size."""
    records = [json.loads(line) for line in FIXTURE.read_text().splitlines()]
    start, body = records[0], records[1:]
    span = body[-1]["ts"] - body[0]["ts"] + 40_000
    rounds = max(r.get("round") or 0 for r in body)
    tree_slots = sorted({s for n in next(r for r in reversed(body) if r["name"] == "cache.tree")["attrs"]["nodes"]
                         for s in n["value"]})
    out, seq, k = [start], 1, 0

    def emit(rec: dict) -> None:
        nonlocal seq
        rec["seq"] = seq
        seq += 1
        out.append(rec)

    while len(out) < n_events:
        if k:  # give the last copy's cached slots back, so this copy starts on an empty pool and tree
            ts, rnd = body[0]["ts"] + k * span - 30_000, k * rounds + 1
            emit({"v": 1, "ts": ts, "proc": "engine", "pid": 4242, "name": "kv.free", "ph": "i", "round": rnd,
                  "attrs": {"slots": tree_slots, "reason": "flush"}})
            emit({"v": 1, "ts": ts + 10_000, "proc": "engine", "pid": 4242, "name": "cache.tree", "ph": "i",
                  "round": rnd, "attrs": {"nodes": [{"id": 0, "parent": None, "key": [], "value": [],
                                                     "lock_ref": 1}]}})
        for r in body:
            if r["name"] == "sched.config" and k:
                continue
            r = json.loads(json.dumps(r))
            r["ts"] += k * span
            if "rid" in r:
                r["rid"] = f"c{k}-{r['rid']}"
            if "rids" in r:
                r["rids"] = [f"c{k}-{x}" for x in r["rids"]]
            if r.get("round") is not None:
                r["round"] += k * rounds
            if "flow" in r:
                r["flow"]["id"] = f"{r['flow']['id']}.{k}"
            for key in ("waiting", "running"):
                if isinstance(r.get("attrs", {}).get(key), list):
                    r["attrs"][key] = [f"c{k}-{x}" for x in r["attrs"][key]]
            if r.get("attrs", {}).get("chunked"):
                r["attrs"]["chunked"] = f"c{k}-{r['attrs']['chunked']}"
            emit(r)
        k += 1
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "engine-4242.jsonl").write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in out))
    return len(out)


def _timed(fn, repeat: int = 1) -> float:
    """Median seconds of fn() over `repeat` calls."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


async def _app_figures(trace, steps: int) -> dict[str, float]:
    from tui.app import ReplayApp

    async def timed_ms(fn, n: int) -> float:
        times = []
        for _ in range(n):
            t = time.perf_counter()
            result = fn()
            if asyncio.iscoroutine(result):
                await result
            times.append(time.perf_counter() - t)
        return statistics.median(times) * 1e3

    out: dict[str, float] = {}
    t0 = time.perf_counter()
    app = ReplayApp(trace)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        out["open_s"] = time.perf_counter() - t0
        app.action_tab("round")  # a pane with a table to redraw on every step
        await pilot.pause()
        t = time.perf_counter()
        app.action_end()  # the first End replays the whole trace (and keeps its checkpoints)
        out["first_end_s"] = time.perf_counter() - t
        out["step_back_ms"] = await timed_ms(lambda: app.action_step(-1), min(steps, 50))
        app.action_start()
        out["step_action_ms"] = await timed_ms(lambda: app.action_step(1), steps)
        app.action_start()
        out["step_key_ms"] = await timed_ms(lambda: pilot.press("right"), min(steps, 50))
        out["idle_key_ms"] = await timed_ms(lambda: pilot.press("x"), min(steps, 50))  # unbound: Pilot's own wait
        app.action_start()
        out["round_action_ms"] = await timed_ms(lambda: app.action_round(1), min(steps, 50))
        app.action_tab("dash")  # four panes at once: round, KV, queues + radix, output
        await pilot.pause()
        app.action_start()
        out["step_dash_ms"] = await timed_ms(lambda: app.action_step(1), min(steps, 50))
        app.action_tab("requests")  # the pane with a row per request: the most work per step
        await pilot.pause()
        app.action_start()
        out["step_requests_ms"] = await timed_ms(lambda: app.action_step(1), min(steps, 50))
        assert app.timeline.cursor == min(steps, 50)
    return out


def _assert_checks(trace) -> None:
    problems = check_trace(trace)
    trace.cache.clear()  # the app's figures start from an unreplayed trace, as when it opens one
    if problems:
        raise SystemExit(f"a synthesized trace of {len(trace.events):,} events fails trace check: {problems[:3]}")


def run(sizes: list[int], steps: int, with_tracer_replay: bool, check: bool) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            folder = Path(tmp) / f"t{n}"
            size = synthesize(folder, n)
            row: dict = {"events": size}
            row["load_s"] = _timed(lambda f=folder: load_trace(f), repeat=3 if size < 50_000 else 1)
            trace = load_trace(folder)
            row["requests"], row["rounds"] = len(trace.rids()), len(trace.rounds())
            if check:  # every size, the largest too: a figure on a trace that does not check is worth nothing
                row["check_s"] = _timed(lambda t=trace: _assert_checks(t))
            row.update(asyncio.run(_app_figures(trace, steps)))
            if with_tracer_replay:
                row["tracer_replay_s"] = _timed(lambda t=trace: replay(load_trace(t.folder)))
            rows.append(row)
            print(_line(row), flush=True)
    return rows


COLUMNS = (("events", "events", "{:,}"), ("requests", "requests", "{:,}"), ("load_s", "load s", "{:.2f}"),
           ("open_s", "open s", "{:.2f}"), ("step_action_ms", "step ms", "{:.2f}"),
           ("step_key_ms", "key ms", "{:.1f}"), ("idle_key_ms", "idle key ms", "{:.1f}"),
           ("step_dash_ms", "step, dash ms", "{:.2f}"), ("step_requests_ms", "step, reqs pane ms", "{:.2f}"),
           ("round_action_ms", "round ms", "{:.2f}"),
           ("first_end_s", "1st end s", "{:.2f}"), ("step_back_ms", "back ms", "{:.2f}"),
           ("tracer_replay_s", "replay() s", "{:.2f}"), ("check_s", "check s", "{:.2f}"))


def _line(row: dict) -> str:
    return "| " + " | ".join(fmt.format(row[k]) if k in row else "-" for k, _, fmt in COLUMNS) + " |"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000],
                   help="trace sizes in events (default 1000 10000 100000)")
    p.add_argument("--steps", type=int, default=200, help="steps timed per kind of move (default 200)")
    p.add_argument("--with-tracer-replay", action="store_true",
                   help="also time tracer.replay.replay() on each trace (about 80 s at 100k events)")
    p.add_argument("--no-check", action="store_true", help="skip check_trace on the synthesized traces")
    p.add_argument("--json", help="also write the figures to this file")
    args = p.parse_args()
    print("| " + " | ".join(title for _, title, _ in COLUMNS) + " |")
    print("|" + " ---: |" * len(COLUMNS))
    rows = run(args.sizes, args.steps, args.with_tracer_replay, not args.no_check)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    print("\nstep ms: the app's work for one → (state, scrubber, lanes strip, round pane); key ms: the same "
          "key sent by Textual's Pilot, drawing and the Pilot's wait for the screen included; idle key ms: an "
          "unbound key, i.e. the Pilot's wait alone; step, dash ms: → with the dashboard in view (round, KV, "
          "queues, radix and output panes); step, reqs pane ms: → with the requests table in view; "
          "1st end s: the first End (replays the whole trace); back ms: ← from there (restores the nearest "
          "checkpoint).")


if __name__ == "__main__":
    main()
