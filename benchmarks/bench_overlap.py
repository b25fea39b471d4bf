"""The overlap scheduler on and off, side by side: offline throughput at 16 and 64 concurrent requests.

    python benchmarks/bench_overlap.py                 # 16 and 64 requests, 32 new tokens, best of 2
    python benchmarks/bench_overlap.py --quick         # 16 new tokens, 1 repeat
    python benchmarks/bench_overlap.py --threads 1 --dtype float32 --json out.json

Workload: bench_engine.py's chat prompts (20-200 tokens after the chat template), the first N of them,
each generating exactly --max-new-tokens tokens (greedy, ignore_eos), in one Engine.generate() call on
two forks of one loaded Engine: the normal loop and --enable-overlap-schedule. The runs alternate (who goes
first flips every repeat) and each side's best run is reported, with the process's CPU seconds and the
share of the machine other processes used meanwhile (a shared machine makes wall times swing).

With the overlap loop the scheduler's work for round N+1 (admission, KV slots, result processing) runs on
the main thread while round N's forward runs on the forward thread. That only pays if the two can run at
once: on a GPU the forward runs on the device; on a CPU both want the cores, and torch's intra-op
threads and the scheduler thread compete for them. "same" is the share of requests whose greedy tokens
agree between the sides: all of them in float32; in bfloat16 a request batched differently may round
differently (the exit status is 1 only for a float32 disagreement).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from bench_engine import engine_run, interleaved, make_chat_prompts  # noqa: E402

from minisgl.entrypoints.engine import Engine  # noqa: E402

SIZES = (16, 64)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="overlap scheduler on vs off, offline throughput")
    p.add_argument("--quick", action="store_true", help="16 new tokens, 1 repeat")
    p.add_argument("--max-new-tokens", type=int, default=32, help="new tokens per request (default 32)")
    p.add_argument("--repeats", type=int, default=2, help="interleaved runs per side; the best is reported")
    p.add_argument("--sizes", type=int, nargs="+", default=list(SIZES), help="concurrent requests (16 64)")
    p.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    p.add_argument("--dtype", default="auto", choices=["auto", "bfloat16", "float32"], help="engine dtype")
    p.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = p.parse_args(argv)
    if args.quick:
        args.max_new_tokens, args.repeats = 16, 1
    if args.max_new_tokens < 1 or args.repeats < 1 or any(n < 1 for n in args.sizes):
        p.error("--max-new-tokens, --repeats and --sizes must be >= 1")
    if args.threads is not None and args.threads < 1:
        p.error("--threads must be >= 1")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    base = Engine(dtype=args.dtype, max_total_tokens=32768, max_running_requests=max(args.sizes))
    prompts = make_chat_prompts(base.tokenizer, max(args.sizes))
    normal, overlap = base.fork(), base.fork(enable_overlap_schedule=True)
    warm = [[{"role": "user", "content": "Hi"}]]
    for e in (normal, overlap):
        engine_run(e, warm, [4])
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), dtype {base.server_args.dtype}, "
          f"{args.max_new_tokens} new tokens, best of {args.repeats}")
    print(f"{'requests':>8} {'normal tok/s':>13} {'overlap tok/s':>14} {'ratio':>6} {'cpu s n/o':>12} "
          f"{'others':>7} {'same':>6}")
    rows = []
    for n in args.sizes:
        lengths = [args.max_new_tokens] * n
        off, on = interleaved([lambda e=e: engine_run(e, prompts[:n], lengths) for e in (normal, overlap)],
                              args.repeats, "best")
        tok_s = [r["completion_tokens"] / r["wall_s"] for r in (off, on)]
        same = sum(a == b for a, b in zip(off["output_ids"], on["output_ids"])) / n
        others = max((r["others_cpu_share"] or 0.0) for r in (off, on))
        rows.append({"requests": n, "normal_tok_s": tok_s[0], "overlap_tok_s": tok_s[1],
                     "ratio": tok_s[1] / tok_s[0], "normal_cpu_s": off["cpu_s"], "overlap_cpu_s": on["cpu_s"],
                     "others_cpu_share": others, "same_tokens": same,
                     "normal_wall_s": off["all_wall_s"], "overlap_wall_s": on["all_wall_s"]})
        print(f"{n:>8} {tok_s[0]:>13.1f} {tok_s[1]:>14.1f} {tok_s[1] / tok_s[0]:>5.2f}x "
              f"{off['cpu_s']:>5.1f}/{on['cpu_s']:<5.1f} {others:>6.0%} {same:>6.0%}")
    overlap.shutdown()
    if args.json is not None:
        args.json.write_text(json.dumps({"max_new_tokens": args.max_new_tokens, "threads": torch.get_num_threads(),
                                         "dtype": base.server_args.dtype, "rows": rows}, indent=1))
    exact = base.server_args.dtype == "float32"
    return 1 if exact and any(r["same_tokens"] < 1 for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
