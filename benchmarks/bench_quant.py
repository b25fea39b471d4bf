"""--quantization gguf against the dequantized bf16 model: decode speed, greedy agreement, memory.

    python benchmarks/bench_quant.py                    # about 7 minutes on a busy 2-core box (3 models)
    python benchmarks/bench_quant.py --threads 1        # on a busy shared machine

- decode tok/s at batch 1 and 8 (bench_forward.py's workload: equal prompts of --prompt-len tokens, one
  untimed EXTEND, then --decode-rounds timed greedy DECODE rounds), both models interleaved, best of
  --repeats;
- greedy agreement on the five chat prompts of tests/conftest.py, --new-tokens each, one prompt at a
  time: the share of positions where the int4 model's token equals the dequantized bf16 model's, and the
  share before the first difference (after one, the two continue from different texts). The dequantized
  bf16 model against float32 (the exact reference) is printed beside it, for scale;
- memory: each model's tensors (weights, packed codes, scales), and the process RSS of a fresh process
  that loads only that model (its KV pool kept small).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("TQDM_DISABLE", "1")

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_forward import batch_prompts, engine_decode, make_prompt, measure  # noqa: E402

from minisgl.model_executor.model_runner import ModelRunner  # noqa: E402
from minisgl.model_executor.static_generate import greedy_generate  # noqa: E402
from minisgl.model_loader.loader import load_model_config, load_tokenizer, resolve_model  # noqa: E402
from minisgl.server_args import ServerArgs  # noqa: E402

CHAT_PROMPTS = [  # the same five as tests/conftest.py
    "What is the capital of China?",
    "Write a haiku about the sea.",
    "Explain what a KV cache is in one sentence.",
    "List three prime numbers.",
    "Who wrote Romeo and Juliet? Answer briefly, then tell me one more play by the same author.",
]
MODES = {"bf16": ("bfloat16", None), "bf16+gguf-int4": ("bfloat16", "gguf"), "fp32": ("float32", None)}


def load(model, mode: str, kv_tokens: int, batch: int) -> ModelRunner:
    dtype, quant = MODES[mode]
    src = resolve_model(model)
    args = ServerArgs(model=model, dtype=dtype, quantization=quant, max_total_tokens=kv_tokens,
                      max_running_requests=batch)
    return ModelRunner(load_model_config(src), src, args)


def tensor_mib(runner: ModelRunner) -> float:
    seen, total = set(), 0
    for t in [*runner.model.parameters(), *runner.model.buffers()]:
        if t.data_ptr() not in seen:
            seen.add(t.data_ptr())
            total += t.numel() * t.element_size()
    return total / 2**20


def rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def child_rss(model, mode: str) -> dict:
    """RSS of a fresh process that loads only `mode` (so the other models' memory is not counted), before
    and after loading."""
    cmd = [sys.executable, __file__, "--rss-of", mode] + (["--model", model] if model else [])
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=True).stdout
        return json.loads(out.strip().splitlines()[-1])
    except (subprocess.SubprocessError, ValueError, IndexError, OSError) as e:
        return {"error": f"{type(e).__name__}: {e}"}


def agreement(a: list[list[int]], b: list[list[int]]) -> tuple[float, float]:
    """(share of equal positions, share of positions before each answer's first difference)."""
    total = sum(len(x) for x in a)
    same = sum(x == y for xs, ys in zip(a, b) for x, y in zip(xs, ys))
    prefix = 0
    for xs, ys in zip(a, b):
        for x, y in zip(xs, ys):
            if x != y:
                break
            prefix += 1
    return same / total, prefix / total


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default=None, help="a .gguf file (default: the bundled SmolLM2 Q4_1)")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own)")
    p.add_argument("--prompt-len", type=int, default=64)
    p.add_argument("--decode-rounds", type=int, default=32)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--new-tokens", type=int, default=32, help="greedy tokens per chat prompt (default: 32)")
    p.add_argument("--rss-of", choices=list(MODES), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    if args.rss_of:  # the child of child_rss
        before = rss_mib()
        runner = load(args.model, args.rss_of, 256, 1)
        print(json.dumps({"rss_mib": rss_mib(), "before_mib": before, "tensor_mib": tensor_mib(runner)}))
        return 0

    batches = (1, 8)
    kv = max(batches) * (args.prompt_len + args.decode_rounds + 1) + 16
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), cpu count {os.cpu_count()}", flush=True)
    runners = {}
    for mode in MODES:
        t0 = time.perf_counter()
        runners[mode] = load(args.model, mode, max(kv, 1024), max(batches))
        print(f"loaded {mode:15s} in {time.perf_counter() - t0:4.1f}s, tensors {tensor_mib(runners[mode]):6.1f} MiB",
              flush=True)
    bf16, q = runners["bf16"], runners["bf16+gguf-int4"]

    tokenizer = load_tokenizer(resolve_model(args.model))
    base = make_prompt(tokenizer, args.prompt_len)
    print(f"\ndecode tok/s ({args.decode_rounds} rounds after a {args.prompt_len}-token prompt, best of "
          f"{args.repeats}; others' CPU share in brackets)")
    for b in batches:
        prompts = batch_prompts(base, b)
        res = measure([lambda r=r: engine_decode(r, prompts, args.decode_rounds)[0] for r in (bf16, q)],
                      args.repeats, "best")
        (s0, o0), (s1, o1) = res
        tok = b * args.decode_rounds
        busy = " ".join(f"[{o:.0%}]" if o is not None else "" for o in (o0, o1))
        print(f"  batch {b:2d}: bf16 {tok / s0:7.1f}   int4 {tok / s1:7.1f}   speedup {s0 / s1:4.2f}x  {busy}",
              flush=True)

    chats = [list(tokenizer.apply_chat_template([{"role": "user", "content": c}], add_generation_prompt=True,
                                                tokenize=True, return_dict=False)) for c in CHAT_PROMPTS]
    answers = {m: [greedy_generate(r, [c], args.new_tokens)[0] for c in chats] for m, r in runners.items()}
    n = sum(len(a) for a in answers["bf16"])
    print(f"\ngreedy agreement on {len(chats)} chat prompts x {args.new_tokens} tokens ({n} tokens)")
    for x, y in (("bf16+gguf-int4", "bf16"), ("bf16", "fp32"), ("bf16+gguf-int4", "fp32")):
        same, prefix = agreement(answers[x], answers[y])
        print(f"  {x:15s} vs {y:5s}: {same:6.1%} of positions equal, {prefix:6.1%} before the first difference")

    print("\nprocess RSS of a fresh process loading one model (256-slot KV pool)")
    for mode in ("bf16", "bf16+gguf-int4"):
        r = child_rss(args.model, mode)
        if "error" in r:
            print(f"  {mode:15s}: not measured ({r['error']})")
        else:
            print(f"  {mode:15s}: {r['rss_mib']:6.1f} MiB ({r['rss_mib'] - r['before_mib']:6.1f} MiB more than "
                  f"after the imports; tensors {r['tensor_mib']:6.1f} MiB)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
