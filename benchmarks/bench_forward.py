"""Forward-loop throughput: minisgl's engine vs Hugging Face transformers, bf16, same weights.

    python benchmarks/bench_forward.py            # full run (about 8 minutes on an idle 2-core box)
    python benchmarks/bench_forward.py --quick    # about a minute and a half, loading included
    python benchmarks/bench_forward.py --json out.json
    python benchmarks/bench_forward.py --threads 1 --clock cpu   # on a busy shared machine

Workloads
- prefill: one prompt of --prefill-len tokens. minisgl: one EXTEND; transformers: one forward with
  use_cache=True.
- decode @ batch B: B equal-length prompts of --prompt-len tokens (the same token ids on both sides).
  minisgl: one EXTEND of all B prompts, then R DECODE rounds (greedy), only the R rounds timed;
  transformers: generate(do_sample=False, min_new_tokens=max_new_tokens), decode time taken as
  time(generate R + 1 tokens) - time(generate 1 token), so its prefill drops out. Both count B x R
  tokens, and both sides' KV grows from prompt-len to prompt-len + R.

Every workload is warmed up once per side, then the two sides run interleaved --repeats times and the
best (or --reduce median) is kept. Each line says when other processes took more than 5% of the CPUs
while it ran: on a shared box that makes wall-clock numbers low and noisy (--clock cpu helps).

Neither side uses the scheduler or the HTTP server: this measures the model forward loop only
(minisgl.model_executor.static_generate's extend()/decode()). Both run with the same torch thread count.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import sys
import time
from pathlib import Path

# before torch: tqdm reads its TQDM_* settings once, at import (hides transformers' GGUF progress bar)
os.environ.setdefault("TQDM_DISABLE", "1")

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from minisgl.model_executor.model_runner import ModelRunner
from minisgl.model_executor.static_generate import decode, extend
from minisgl.model_loader.loader import load_model_config, load_tokenizer, resolve_model
from minisgl.server_args import ServerArgs

BANDWIDTH_NOTE = (
    "note: batch-1 decode streams every bf16 weight (about 270 MB for SmolLM2-135M) once per token; on the "
    "2-core VM these figures were taken on, the packed bf16 matrix multiplies streamed about 12 GB/s over both "
    "threads, about 22 ms of a 26-28 ms step (see lessons/docs/benchmarks.md)."
)

_TEXT = (
    "The engine keeps every request's key and value vectors in a paged pool, and a table maps each "
    "request's logical positions to the slots that hold them. A decode round reads that table, gathers "
    "the history of every running request, and appends one new token per request. "
)


# what the workloads are timed with: wall time, or (--clock cpu) this process's CPU time
clock = time.perf_counter


# ---- inputs ---------------------------------------------------------------------------------------
def make_prompt(tokenizer, n: int) -> list[int]:
    """`n` real-text token ids (the text repeated until long enough), the same for both engines."""
    ids: list[int] = []
    while len(ids) < n:
        ids += tokenizer.encode(_TEXT, add_special_tokens=False)
    return ids[:n]


def batch_prompts(base: list[int], batch: int) -> list[list[int]]:
    """`batch` equal-length prompts: the base prompt rotated by i, so rows differ but lengths match."""
    return [base[i % len(base):] + base[: i % len(base)] for i in range(batch)]


# ---- minisgl --------------------------------------------------------------------------------------
def engine_prefill(runner: ModelRunner, prompt: list[int]) -> float:
    """Seconds for one EXTEND of `prompt` (slots taken and given back around it)."""
    idxs = runner.req_to_token_pool.alloc(1)
    try:
        t0 = clock()
        logits, loc = extend(runner, idxs, [prompt], [0])
        runner.sample_greedy(logits).tolist()
        dt = clock() - t0
        runner.token_to_kv_pool.free(loc)
    finally:
        runner.req_to_token_pool.free(idxs)
    return dt


def engine_decode(
    runner: ModelRunner, prompts: list[list[int]], rounds: int
) -> tuple[float, list[list[int]]]:
    """One EXTEND of all prompts (untimed), then `rounds` greedy DECODE rounds (timed, sampling included)."""
    idxs = runner.req_to_token_pool.alloc(len(prompts))
    taken: list[torch.Tensor] = []
    try:
        logits, loc = extend(runner, idxs, prompts, [0] * len(prompts))
        taken.append(loc)
        outputs = [[t] for t in runner.sample_greedy(logits).tolist()]
        seq_lens = [len(p) for p in prompts]
        t0 = clock()
        for _ in range(rounds):
            seq_lens = [s + 1 for s in seq_lens]
            logits, loc = decode(runner, idxs, [o[-1] for o in outputs], seq_lens)
            taken.append(loc)
            for o, t in zip(outputs, runner.sample_greedy(logits).tolist()):
                o.append(t)
        dt = clock() - t0
    finally:
        if taken:
            runner.token_to_kv_pool.free(torch.cat(taken))
        runner.req_to_token_pool.free(idxs)
    return dt, outputs


# ---- transformers ---------------------------------------------------------------------------------
def load_hf_model(src):
    """transformers' model on the same weights (GGUF file or HF folder), bf16, eval mode; says how long."""
    import transformers
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    t0 = time.perf_counter()
    if src.kind == "gguf":
        model = AutoModelForCausalLM.from_pretrained(str(src.path.parent), gguf_file=src.path.name,
                                                     dtype=torch.bfloat16)
    else:
        model = AutoModelForCausalLM.from_pretrained(str(src.path), dtype=torch.bfloat16)
    print(f"transformers {transformers.__version__} loaded in {time.perf_counter() - t0:.1f}s "
          f"(attention: {model.config._attn_implementation})", flush=True)
    return model.eval()


@torch.inference_mode()
def hf_prefill(model, prompt: list[int]) -> float:
    ids = torch.tensor([prompt], dtype=torch.int64)
    t0 = clock()
    out = model(input_ids=ids, use_cache=True)
    out.logits[:, -1].argmax(-1).tolist()
    return clock() - t0


@torch.inference_mode()
def hf_generate(model, prompts: list[list[int]], new_tokens: int, pad_id: int) -> tuple[float, torch.Tensor]:
    ids = torch.tensor(prompts, dtype=torch.int64)
    t0 = clock()
    out = model.generate(
        input_ids=ids,
        attention_mask=torch.ones_like(ids),
        do_sample=False,
        max_new_tokens=new_tokens,
        min_new_tokens=new_tokens,
        pad_token_id=pad_id,
        use_cache=True,
    )
    return clock() - t0, out[:, ids.shape[1]:]


def hf_decode(model, prompts: list[list[int]], rounds: int, pad_id: int) -> tuple[float, list[list[int]]]:
    """Decode-only seconds for `rounds` steps: generate(rounds + 1) minus generate(1) (its prefill)."""
    t_one, _ = hf_generate(model, prompts, 1, pad_id)
    t_all, out = hf_generate(model, prompts, rounds + 1, pad_id)
    return max(t_all - t_one, 1e-9), out.tolist()


# ---- driver ---------------------------------------------------------------------------------------
class CpuMeter:
    """How much of the machine other processes used while a measurement ran (Linux /proc; else None).

    A shared 2-core box makes numbers swing several-fold; this makes a noisy measurement visible."""

    def __init__(self):
        self.start = self._snap()

    @staticmethod
    def _snap():
        try:
            with open("/proc/stat") as f:
                cpu = [int(x) for x in f.readline().split()[1:]]
            with open("/proc/self/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            busy = sum(cpu) - cpu[3] - (cpu[4] if len(cpu) > 4 else 0)  # minus idle and iowait
            return busy, int(fields[11]) + int(fields[12]), time.perf_counter()  # self utime + stime
        except (OSError, ValueError, IndexError):
            return None

    def others_share(self) -> float | None:
        """Share of all cores' time spent by other processes since construction (0..1)."""
        end = self._snap()
        if self.start is None or end is None:
            return None
        hz = os.sysconf("SC_CLK_TCK")
        wall = end[2] - self.start[2]
        others = (end[0] - self.start[0]) - (end[1] - self.start[1])
        return max(0.0, min(1.0, others / hz / (wall * (os.cpu_count() or 1)))) if wall > 0 else None


def measure(fns: list, repeats: int, reduce: str) -> list[tuple[float, float | None]]:
    """Warm each fn (returns seconds) up once, then run them interleaved `repeats` times, so a burst of
    load from elsewhere hits both sides alike. Per fn: (min or median seconds, others' CPU share then)."""
    for fn in fns:
        fn()
    runs: list[list[tuple[float, float | None]]] = [[] for _ in fns]
    for _ in range(repeats):
        for i, fn in enumerate(fns):
            meter = CpuMeter()
            dt = fn()
            runs[i].append((dt, meter.others_share()))
    out = []
    for r in runs:
        r = sorted(r, key=lambda x: x[0])
        out.append(r[0] if reduce == "best" else r[(len(r) - 1) // 2])
    return out


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Prefill and decode throughput of minisgl's forward loop vs transformers (bf16, same "
        "weights, same thread count).",
        epilog=BANDWIDTH_NOTE,
    )
    p.add_argument("--quick", action="store_true",
                   help="fewer decode rounds and repeats: the whole run takes about a minute")
    p.add_argument("--model", default=None,
                   help="a .gguf file or Hugging Face folder (default: the bundled SmolLM2)")
    p.add_argument("--threads", type=int, default=None,
                   help="torch threads for both sides (default: torch's own, usually the core count)")
    p.add_argument("--prefill-len", type=int, default=512,
                   help="prompt length of the prefill workload (default: 512)")
    p.add_argument("--prompt-len", type=int, default=64,
                   help="prompt length of each request in the decode workloads (default: 64)")
    p.add_argument("--batches", default="1,8,32,64",
                   help="comma-separated decode batch sizes (default: 1,8,32,64)")
    p.add_argument("--decode-rounds", type=int, default=None,
                   help="timed decode rounds per batch (default: 64, or 16 with --quick)")
    p.add_argument("--repeats", type=int, default=None,
                   help="timed repeats per workload after one warm-up (default: 3, or 1 with --quick)")
    p.add_argument("--reduce", choices=["median", "best"], default="best",
                   help="how repeats are combined (default: best, the least disturbed on a shared machine)")
    p.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                   help="wall: elapsed time (default). cpu: this process's CPU time, which time spent "
                   "preempted by other processes does not inflate; use it with --threads 1 on a shared "
                   "machine (with more threads it also counts the workers' spin-waiting)")
    p.add_argument("--skip-hf", action="store_true", help="measure minisgl only")
    p.add_argument("--json", metavar="PATH", default=None, help="also write the results as JSON to PATH")
    args = p.parse_args(argv)
    if args.decode_rounds is None:
        args.decode_rounds = 16 if args.quick else 64
    if args.repeats is None:
        args.repeats = 1 if args.quick else 3
    args.batch_sizes = [int(b) for b in args.batches.split(",") if b.strip()]
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    threads = torch.get_num_threads()
    torch.manual_seed(0)
    global clock
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    if args.clock == "cpu" and threads > 1:
        print(f"warning: --clock cpu with {threads} threads also counts spin-waiting workers; "
              "use --threads 1 for a meaningful CPU-time rate", flush=True)

    src = resolve_model(args.model)
    cfg = load_model_config(src)
    tokenizer = load_tokenizer(src)
    max_batch = max(args.batch_sizes)
    kv_tokens = max(args.prefill_len, max_batch * (args.prompt_len + args.decode_rounds + 1)) + 16
    print(f"model: {src.path.name}  ({cfg.num_hidden_layers} layers, hidden {cfg.hidden_size})", flush=True)
    print(f"torch {torch.__version__}, {threads} thread(s) for both sides, cpu count {os.cpu_count()}, "
          f"{'quick' if args.quick else 'full'} mode, {args.clock} clock", flush=True)

    t0 = time.perf_counter()
    runner = ModelRunner(
        # the dequantized weights, the same numbers transformers runs (bench_quant.py measures the quantized ones)
        cfg, src, ServerArgs(model=args.model, dtype="bfloat16", quantization="none", max_total_tokens=kv_tokens,
                             max_running_requests=max_batch),
    )
    print(f"minisgl loaded in {time.perf_counter() - t0:.1f}s", flush=True)
    hf_model = None
    if not args.skip_hf:
        hf_model = load_hf_model(src)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (cfg.eos_token_ids or [0])[0]
    if threads != torch.get_num_threads():  # a loader must not have changed it under us
        torch.set_num_threads(threads)

    rows: list[dict] = []  # for --json
    table: list[tuple[str, float, float | None]] = []  # unrounded, for the printed table

    def report(workload: str, tokens: int, res: list[tuple[float, float | None]]) -> None:
        (eng_s, eng_busy), (hf_s, hf_busy) = res[0], (res[1] if len(res) > 1 else (None, None))
        eng = tokens / eng_s
        hf = tokens / hf_s if hf_s else None
        row = {"workload": workload, "tokens": tokens, "minisgl_tok_s": round(eng, 2),
               "transformers_tok_s": round(hf, 2) if hf else None,
               "ratio": round(eng / hf, 3) if hf else None,
               "minisgl_s": round(eng_s, 4), "transformers_s": round(hf_s, 4) if hf_s else None,
               "others_cpu_share": [None if x is None else round(x, 3) for x in (eng_busy, hf_busy)]}
        rows.append(row)
        table.append((workload, eng, hf))
        hf_txt = f"{hf:.1f} tok/s" if hf else "-"
        ratio_txt = f"{eng / hf:.2f}x" if hf else "-"
        busy = max((x for x in (eng_busy, hf_busy) if x is not None), default=None)
        busy_txt = f"   (other processes: {busy:.0%} of the CPUs)" if busy is not None and busy > 0.05 else ""
        print(f"  {workload:<18} minisgl {eng:9.1f} tok/s   transformers {hf_txt:>14}   "
              f"ratio {ratio_txt}{busy_txt}", flush=True)

    # prefill
    prompt = make_prompt(tokenizer, args.prefill_len)
    fns = [lambda: engine_prefill(runner, prompt)]
    if hf_model is not None:
        fns.append(lambda: hf_prefill(hf_model, prompt))
    report(f"prefill {args.prefill_len}", args.prefill_len, measure(fns, args.repeats, args.reduce))

    # decode
    base = make_prompt(tokenizer, args.prompt_len)
    agree: dict[int, float] = {}
    for b in args.batch_sizes:
        prompts = batch_prompts(base, b)
        r = args.decode_rounds
        eng_out: list = []
        hf_out: list = []

        def run_engine(prompts=prompts, r=r, sink=eng_out):
            dt, out = engine_decode(runner, prompts, r)
            sink[:] = out
            return dt

        def run_hf(prompts=prompts, r=r, sink=hf_out):
            dt, out = hf_decode(hf_model, prompts, r, pad_id)
            sink[:] = out
            return dt

        res = measure([run_engine] + ([run_hf] if hf_model is not None else []), args.repeats, args.reduce)
        if hf_out:
            # greedy bf16 outputs can drift apart after a near-tie; report how much of them match
            same = sum(a == c for e, h in zip(eng_out, hf_out) for a, c in zip(e, h))
            agree[b] = same / sum(len(e) for e in eng_out)
        report(f"decode batch {b}", b * r, res)

    print()
    header = f"| {'workload':<18} | {'minisgl tok/s':>13} | {'transformers tok/s':>18} | {'ratio':>6} |"
    print(header)
    print("|" + "|".join("-" * (len(c)) for c in header.split("|")[1:-1]) + "|")
    for workload, eng, hf in table:
        hf_txt = f"{hf:.1f}" if hf else "-"
        ratio_txt = f"{eng / hf:.2f}x" if hf else "-"
        print(f"| {workload:<18} | {eng:>13.1f} | {hf_txt:>18} | {ratio_txt:>6} |")
    print()
    print(BANDWIDTH_NOTE)
    if agree:
        print("greedy token agreement minisgl vs transformers: "
              + ", ".join(f"batch {b}: {a:.0%}" for b, a in agree.items()))
    print(f"decode: prompt {args.prompt_len} tokens, {args.decode_rounds} timed rounds; "
          f"{args.repeats} repeat(s), {args.reduce}; {threads} thread(s); {args.clock} clock"
          + (" (tok/s are tokens per CPU-second)" if args.clock == "cpu" else ""))
    noisy = [r["workload"] for r in rows if max((x or 0) for x in r["others_cpu_share"]) > 0.05]
    if noisy and args.clock == "cpu":
        print(f"note: other processes used > 5% of the CPUs during: {', '.join(noisy)}; the CPU clock leaves "
              "out time spent preempted, but shared caches and memory bandwidth still slow these a little")
    elif noisy:
        print(f"warning: other processes used > 5% of the CPUs during: {', '.join(noisy)}; "
              "those numbers are low and noisy; rerun on an idle machine")

    if args.json:
        doc = {
            "model": src.path.name,
            "dtype": "bfloat16",
            "threads": threads,
            "mode": "quick" if args.quick else "full",
            "torch": torch.__version__,
            "transformers": None if hf_model is None else __import__("transformers").__version__,
            "python": platform.python_version(),
            "prefill_len": args.prefill_len,
            "prompt_len": args.prompt_len,
            "decode_rounds": args.decode_rounds,
            "repeats": args.repeats,
            "reduce": args.reduce,
            "clock": args.clock,
            "results": rows,
            "greedy_agreement": {str(b): round(a, 4) for b, a in agree.items()},
            "note": BANDWIDTH_NOTE,
        }
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(doc, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
