"""Tracing overhead: offline Engine throughput with tracing off, and at levels 1, 2 and 3.

    python benchmarks/bench_tracing.py              # 16 prompts x 64 new tokens, bf16, 3 repeats
    python benchmarks/bench_tracing.py --quick      # 8 prompts x 16 new tokens, 1 repeat
    python benchmarks/bench_tracing.py --json out.json
    python benchmarks/bench_tracing.py --quantization gguf --enable-overlap-schedule --levels 2
    python benchmarks/bench_tracing.py --quantization gguf --speculative-algorithm NGRAM --levels 2

One workload: --prompts distinct prompts of --prompt-len real-text tokens, each generating exactly
--new-tokens tokens (greedy, ignore_eos), submitted together to one Engine.generate() call. Every
configuration runs on a fresh fork of one loaded Engine (fresh pools and radix cache, same weights).
The configurations are interleaved, in a rotated order, --repeats times after one warm-up, and each
one's median is reported, so a noisy neighbour on the machine hits all of them alike. Both the wall
time of generate() and this process's CPU time are reported: on a shared machine the CPU time is the
steadier measure of the work tracing adds. Throughput counts generated tokens (prefill included).
"in hooks" is tracing's own cost measured from inside: the time the scheduler spent in its trace hooks
(building and writing the events; nearly every event comes from there), its median and its median share
of the run's wall time. Unlike the difference of two noisy runs, it cannot come out negative.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TQDM_DISABLE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from minisgl import kernels  # noqa: E402
from minisgl.entrypoints.engine import Engine  # noqa: E402
from minisgl.scheduler.trace_collector import SchedulerTraceCollector  # noqa: E402

HOOK_NS = [0]  # ns spent inside the scheduler's trace hooks, summed over threads (clock_hooks adds to it)


def clock_hooks() -> None:
    """Wrap every trace hook of the scheduler's collector (the methods @hook made) with a clock: tracing's
    own cost measured from inside, without a timer in the engine."""
    for name, fn in list(vars(SchedulerTraceCollector).items()):
        if callable(fn) and hasattr(fn, "__wrapped__") and not getattr(fn, "clocked", False):
            def clocked(self, *args, _fn=fn, **kwargs):
                start = time.perf_counter_ns()
                try:
                    return _fn(self, *args, **kwargs)
                finally:
                    HOOK_NS[0] += time.perf_counter_ns() - start
            clocked.clocked = True
            setattr(SchedulerTraceCollector, name, clocked)

CONFIGS: list[tuple[str, int | None]] = [("off", None), ("level 1", 1), ("level 2", 2), ("level 3", 3)]
_TEXT = ("A scheduler admits waiting requests while the KV cache has room, runs one batch per round, "
         "and streams every new token back to its client. ")


def make_prompts(tokenizer, n: int, length: int) -> list[list[int]]:
    """n distinct prompts: a numbered first line, then the same real text (so the radix cache shares it)."""
    base = tokenizer.encode(_TEXT * (length // 8 + 2), add_special_tokens=False)
    out = []
    for i in range(n):
        head = tokenizer.encode(f"Request {i}: ", add_special_tokens=False)
        out.append((head + base)[:length])
    return out


def run_once(engine: Engine, label: str, level: int | None, prompts, params, keep: Path) -> dict:
    folder = keep / label.replace(" ", "")
    shutil.rmtree(folder, ignore_errors=True)
    fork = engine.fork(trace_dir=str(folder), trace_level=level) if level else engine.fork()
    h0 = HOOK_NS[0]
    t0, c0 = time.perf_counter(), time.process_time()
    results = fork.generate(input_ids=prompts, sampling_params=[params] * len(prompts))
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    hooks = (HOOK_NS[0] - h0) / 1e9
    fork.shutdown()
    tokens = sum(len(r["output_ids"]) for r in results)
    files = list(folder.glob("*.jsonl")) if level else []
    return {"seconds": seconds, "cpu": cpu, "hooks": hooks, "tokens": tokens,
            "bytes": sum(f.stat().st_size for f in files), "events": sum(1 for f in files for _ in f.open())}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--prompt-len", type=int, default=32)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own choice)")
    ap.add_argument("--quantization", choices=["none", "gguf"], default=None,
                    help="the engine's --quantization (default: the engine's own default)")
    ap.add_argument("--enable-overlap-schedule", action="store_true", help="the overlap loop")
    ap.add_argument("--speculative-algorithm", choices=["NGRAM"], default=None, help="n-gram speculation")
    ap.add_argument("--levels", default="1,2,3",
                    help="comma-separated trace levels measured against tracing off (default: 1,2,3)")
    ap.add_argument("--quick", action="store_true", help="8 prompts x 16 tokens, 1 repeat")
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()
    if args.quick:
        args.prompts, args.new_tokens, args.repeats = 8, 16, 1
    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        levels = [int(x) for x in args.levels.split(",")]
    except ValueError:
        ap.error(f"--levels must be comma-separated numbers among 1, 2, 3, not {args.levels!r}")
    if not levels or any(x not in (1, 2, 3) for x in levels):
        ap.error(f"--levels must name trace levels among 1, 2, 3, not {args.levels!r}")
    configs = [("off", None)] + [(label, level) for label, level in CONFIGS if level in levels]

    clock_hooks()
    kv_slots = args.prompts * (args.prompt_len + args.new_tokens) + 64  # everything fits: no retraction
    engine = Engine(dtype=args.dtype, max_total_tokens=kv_slots, max_running_requests=max(args.prompts, 1),
                    quantization=args.quantization, enable_overlap_schedule=args.enable_overlap_schedule,
                    speculative_algorithm=args.speculative_algorithm)
    prompts = make_prompts(engine.tokenizer, args.prompts, args.prompt_len)
    params = {"max_new_tokens": args.new_tokens, "ignore_eos": True, "temperature": 0.0}
    keep = Path(tempfile.mkdtemp(prefix="bench-tracing-"))
    run_once(engine, "warmup", None, prompts, params, keep)

    runs: dict[str, list[dict]] = {label: [] for label, _ in configs}
    for rep in range(args.repeats):
        order = configs[rep % len(configs):] + configs[: rep % len(configs)]
        for label, level in order:
            runs[label].append(run_once(engine, label, level, prompts, params, keep))
            last = runs[label][-1]
            print(f"  repeat {rep + 1} {label:8s} wall {last['seconds']:.2f} s, cpu {last['cpu']:.2f} s",
                  file=sys.stderr)
    shutil.rmtree(keep, ignore_errors=True)

    base = {k: statistics.median(r[k] for r in runs["off"]) for k in ("seconds", "cpu")}
    rows = []
    for label, _ in configs:
        med = {k: statistics.median(r[k] for r in runs[label]) for k in ("seconds", "cpu")}
        first = runs[label][0]
        rows.append({"config": label, "wall_s": round(med["seconds"], 3), "cpu_s": round(med["cpu"], 3),
                     "tok_per_s": round(first["tokens"] / med["seconds"], 1),
                     "tok_per_cpu_s": round(first["tokens"] / med["cpu"], 1),
                     "wall_overhead_pct": _pct(med["seconds"], base["seconds"]),
                     "cpu_overhead_pct": _pct(med["cpu"], base["cpu"]),
                     "hooks_s": round(statistics.median(r["hooks"] for r in runs[label]), 3),
                     "hooks_pct": round(statistics.median(100 * r["hooks"] / r["seconds"]
                                                          for r in runs[label]), 2),
                     "events": first["events"], "trace_kib": round(first["bytes"] / 1024, 1),
                     "runs": [{k: round(r[k], 3) for k in ("seconds", "cpu", "hooks")} for r in runs[label]]})
    print(f"workload: {args.prompts} prompts x {args.prompt_len} prompt tokens, {args.new_tokens} new tokens "
          f"each, {args.dtype}, quantization {args.quantization or 'default'}"
          f"{', overlap' if args.enable_overlap_schedule else ''}"
          f"{', speculation ' + args.speculative_algorithm if args.speculative_algorithm else ''}, cpu, "
          f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), "
          f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}, median of {args.repeats}")
    if args.quantization == "gguf":
        print(f"GGUF products: {kernels.packed_loop()}")
    print("| tracing | wall s | tok/s | wall overhead | CPU s | tok/CPU-s | CPU overhead | in hooks | events "
          "| trace size |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        off = r["config"] == "off"
        print(f"| {r['config']} | {r['wall_s']:.2f} | {r['tok_per_s']:.1f} | "
              f"{'-' if off else format(r['wall_overhead_pct'], '+.1f') + '%'} | {r['cpu_s']:.2f} | "
              f"{r['tok_per_cpu_s']:.1f} | {'-' if off else format(r['cpu_overhead_pct'], '+.1f') + '%'} | "
              f"{'-' if off else _hooks(r)} | "
              f"{'-' if off else r['events']} | {'-' if off else format(r['trace_kib'], '.0f') + ' KiB'} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "rows": rows}, indent=2))
    return 0


def _hooks(row: dict) -> str:
    return f"{1000 * row['hooks_s']:.0f} ms ({row['hooks_pct']:.1f}%)"


def _pct(x: float, base: float) -> float:
    return round(100 * (x - base) / base, 1)


if __name__ == "__main__":
    sys.exit(main())
