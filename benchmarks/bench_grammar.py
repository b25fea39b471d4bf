"""Structured output's cost, side by side: the same batch with and without a grammar (a JSON schema).

    python benchmarks/bench_grammar.py                 # 16 requests, 48 new tokens, best of 3
    python benchmarks/bench_grammar.py --quick         # 24 new tokens, 1 repeat
    python benchmarks/bench_grammar.py --requests 32 --json out.json

Workload: bench_engine.py's chat prompts, the first N, one Engine.generate() each on one loaded Engine,
greedy. The grammar side asks every request for a JSON array of at least 64 integers, so no request can
finish before --max-new-tokens and both sides produce the same number of tokens (the plain side with
ignore_eos). The grammar side pays, per round, for filling each grammar row's mask (xgrammar's matcher),
applying it to the logits and advancing the matcher by the kept token; the grammar is compiled once, in
the warm-up, and cached after. The runs alternate (who goes first flips every repeat) and each side's best
run is reported.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from bench_engine import interleaved, make_chat_prompts  # noqa: E402

from minisgl.entrypoints.engine import Engine  # noqa: E402

SCHEMA = json.dumps({"type": "array", "items": {"type": "integer"}, "minItems": 64})


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="the same batch with and without a JSON-schema grammar")
    p.add_argument("--quick", action="store_true", help="24 new tokens, 1 repeat")
    p.add_argument("--requests", type=int, default=16, help="concurrent requests (default 16)")
    p.add_argument("--max-new-tokens", type=int, default=48, help="new tokens per request (default 48)")
    p.add_argument("--repeats", type=int, default=3, help="interleaved runs per side; the best is reported")
    p.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    p.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = p.parse_args(argv)
    if args.quick:
        args.max_new_tokens, args.repeats = 24, 1
    if min(args.requests, args.max_new_tokens, args.repeats) < 1:
        p.error("--requests, --max-new-tokens and --repeats must be >= 1")
    return args


def run(engine: Engine, prompts: list, params: dict) -> dict:
    if not engine.flush_cache():
        raise RuntimeError("the engine was not idle before a run")
    t0 = time.perf_counter()
    results = engine.generate(prompts, [params] * len(prompts))
    wall = time.perf_counter() - t0
    tokens = sum(r["usage"]["completion_tokens"] for r in results)
    return {"wall_s": wall, "completion_tokens": tokens, "tok_s": tokens / wall,
            "text": results[0]["text"][:32]}


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    base = Engine(max_total_tokens=16384, max_running_requests=max(args.requests, 16))
    prompts = make_chat_prompts(base.tokenizer, args.requests)
    plain = {"max_new_tokens": args.max_new_tokens, "temperature": 0.0, "ignore_eos": True}
    shaped = {"max_new_tokens": args.max_new_tokens, "temperature": 0.0, "json_schema": SCHEMA}
    engine = base.fork()
    run(engine, prompts[:2], {**shaped, "max_new_tokens": 4})  # warm-up: compiles and caches the grammar
    without, with_grammar = interleaved([lambda: run(engine, prompts, plain),
                                         lambda: run(engine, prompts, shaped)], args.repeats, "best")
    ratio = with_grammar["tok_s"] / without["tok_s"]
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), dtype {base.server_args.dtype}, "
          f"{args.requests} requests, up to {args.max_new_tokens} new tokens, best of {args.repeats}")
    print(f"{'side':>14} {'tok/s':>8} {'tokens':>7} {'wall s':>7}  first answer")
    for name, r in (("no grammar", without), ("json_schema", with_grammar)):
        print(f"{name:>14} {r['tok_s']:>8.1f} {r['completion_tokens']:>7} {r['wall_s']:>7.2f}  {r['text']!r}")
    print(f"with a grammar: {ratio:.2f}x the tokens per second without one (the mask's cost: "
          f"{max(0.0, 1 - ratio):.0%})")
    if args.json is not None:
        args.json.write_text(json.dumps({"requests": args.requests, "max_new_tokens": args.max_new_tokens,
                                         "threads": torch.get_num_threads(), "dtype": base.server_args.dtype,
                                         "without": without, "with_grammar": with_grammar, "ratio": ratio},
                                        indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
