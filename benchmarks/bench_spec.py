"""N-gram speculative decoding on and off, side by side, at batch 1.

    python benchmarks/bench_spec.py                      # bfloat16 (the default dtype), 96 new tokens
    python benchmarks/bench_spec.py --dtype float32 --threads 1 --new-tokens 64
    python benchmarks/bench_spec.py --num-draft-tokens 8 --max-window 6
    python benchmarks/bench_spec.py --disable-adaptive-draft   # K drafts every round, not earned (the default)

Two workloads, each prompt run alone (batch 1), greedy:
- repetitive: the answer repeats text of the prompt — copy a paragraph, fix the spelling of one, continue
  a repeating list — where drafts copied from the prompt are often right;
- non-repetitive: the chat prompts of tests/conftest.py, where few n-grams repeat.
Each prompt runs with speculation off and on, interleaved (off, on, off, on … --repeats times, best time
kept), the radix cache flushed before every run. Decode speed is (tokens - 1) / (last token time - first
token time), so the prefill is left out; the tokens of all prompts of a workload are summed. Printed per
workload: tokens/s off and on, their ratio, the acceptance rate (accepted drafts / proposed drafts), the
tokens gained per verify round, and whether the two runs gave the same tokens (in bfloat16 a near-tie may
flip: a verify row and a decode row are computed in different batch shapes). Times are wall clock: on a
shared machine run it twice.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("TQDM_DISABLE", "1")

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from minisgl import Engine, kernels  # noqa: E402

PARAGRAPH = ("The old lighthouse stood at the end of the harbour wall. Every evening the keeper climbed the "
             "ninety steps, wound the clockwork, trimmed the wick and lit the lamp, and every morning he "
             "wrote the weather, the ships he had seen and the oil he had used in a thick blue book.")
TYPOS = ("The old lighthose stood at the end of the harbor wal. Every evening the keper climbed the ninety "
         "steps, wound the clockwork, trimed the wick and lit the lamp, and every morning he wrote the wether, "
         "the ships he had seen and the oil he had used in a thick blue book.")
REPETITIVE = [
    [{"role": "user", "content": "Copy the following text word for word:\n" + PARAGRAPH}],
    [{"role": "user", "content": "Fix the spelling in this text and write it out again:\n" + TYPOS}],
    [{"role": "user", "content": "Rewrite this text, replacing 'keeper' with 'guard':\n" + PARAGRAPH}],
    "Monday, Tuesday, Wednesday, Thursday, Friday. Monday, Tuesday, Wednesday, Thursday, Friday. Monday,",
]
NON_REPETITIVE = [
    [{"role": "user", "content": q}] for q in (
        "What is the capital of China?", "Write a haiku about the sea.",
        "Explain what a KV cache is in one sentence.", "List three prime numbers.",
        "Who wrote Romeo and Juliet? Answer briefly, then tell me one more play by the same author.")
]


def run_once(engine: Engine, prompt, params: dict) -> tuple[list[int], float]:
    """One request alone: its tokens and its decode time (first token to last)."""
    engine.flush_cache()
    ids, first, last = [], None, None
    for delta in engine.generate(prompt, params, stream=True):
        now = time.perf_counter()
        if delta["output_ids"]:
            first = now if first is None else first
            last = now
        ids += delta["output_ids"]
    return ids, (last - first) if first is not None else 0.0


def workload(off: Engine, on: Engine, prompts: list, params: dict, repeats: int) -> dict:
    stats = on.scheduler.model_worker.stats
    before = (stats.proposed, stats.accepted, stats.verify_rounds)
    tokens, t_off, t_on, same = 0, 0.0, 0.0, 0
    for prompt in prompts:
        best_off = best_on = float("inf")
        for _ in range(repeats):
            ids_off, dt = run_once(off, prompt, params)
            best_off = min(best_off, dt)
            ids_on, dt = run_once(on, prompt, params)
            best_on = min(best_on, dt)
        tokens += len(ids_off) - 1
        t_off += best_off
        t_on += best_on
        same += ids_off == ids_on
    proposed, accepted, rounds = (a - b for a, b in zip((stats.proposed, stats.accepted, stats.verify_rounds), before))
    return {"prompts": len(prompts), "tokens": tokens, "off": tokens / t_off, "on": tokens / t_on,
            "acceptance": accepted / proposed if proposed else 0.0,
            "per_round": accepted / rounds if rounds else 0.0, "same": same}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default=None, help="a .gguf or Hugging Face folder (default: the bundled SmolLM2)")
    p.add_argument("--dtype", default="auto", choices=["auto", "bfloat16", "float32"])
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    p.add_argument("--new-tokens", type=int, default=96, help="max_new_tokens of every request")
    p.add_argument("--repeats", type=int, default=2, help="runs per prompt and setting; the best time is kept")
    p.add_argument("--num-draft-tokens", type=int, default=4, help="--speculative-num-draft-tokens")
    p.add_argument("--min-window", type=int, default=3, help="--speculative-ngram-min-match-window-size")
    p.add_argument("--max-window", type=int, default=12, help="--speculative-ngram-max-match-window-size")
    p.add_argument("--disable-adaptive-draft", action="store_true",
                   help="draft K tokens every round (by default a request starts at 1 and doubles while accepted)")
    p.add_argument("--disable-cpu-graph", action="store_true",
                   help="both engines layer by layer (by default their decode rounds replay a cpu graph)")
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    base = Engine(args.model, dtype=args.dtype, max_total_tokens=2048, max_running_requests=1,
                  disable_cpu_graph=args.disable_cpu_graph)
    off = base.fork()
    on = base.fork(speculative_algorithm="NGRAM", speculative_num_draft_tokens=args.num_draft_tokens,
                   speculative_ngram_min_match_window_size=args.min_window,
                   speculative_ngram_max_match_window_size=args.max_window,
                   disable_adaptive_draft=args.disable_adaptive_draft)
    params = {"max_new_tokens": args.new_tokens, "temperature": 0}
    run_once(off, "Hello", {"max_new_tokens": 4, "temperature": 0})  # warm up both paths
    run_once(on, "Hello, hello, hello, hello", {"max_new_tokens": 8, "temperature": 0})
    print(f"model {args.model or 'bundled SmolLM2-135M'}, dtype {args.dtype}, "
          f"torch threads {torch.get_num_threads()}, batch 1, max_new_tokens {args.new_tokens}, "
          f"K={args.num_draft_tokens}, window {args.min_window}..{args.max_window}")
    print(f"GGUF products: {kernels.packed_loop()}")
    print(f"{'workload':<16}{'prompts':>8}{'tokens':>8}{'off tok/s':>11}{'on tok/s':>10}{'ratio':>7}"
          f"{'accept':>8}{'acc/round':>10}{'same':>6}")
    for name, prompts in (("repetitive", REPETITIVE), ("non-repetitive", NON_REPETITIVE)):
        r = workload(off, on, prompts, params, args.repeats)
        print(f"{name:<16}{r['prompts']:>8}{r['tokens']:>8}{r['off']:>11.1f}{r['on']:>10.1f}"
              f"{r['on'] / r['off']:>6.2f}x{r['acceptance']:>8.0%}{r['per_round']:>10.2f}"
              f"{r['same']:>3}/{r['prompts']}")


if __name__ == "__main__":
    main()
