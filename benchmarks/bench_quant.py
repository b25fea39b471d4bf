"""--quantization gguf against the dequantized bf16 model, transformers and llama.cpp: prefill and decode
speed, greedy agreement, memory.

    python benchmarks/bench_quant.py --threads 1 --batches 1,8        # about 10 minutes on a 2-core box
    python benchmarks/bench_quant.py --threads 1                      # 32 and 64 add long prompts: much longer
    python benchmarks/bench_quant.py --threads 1 --llama-python ENV/bin/python   # with llama.cpp beside it

- which products of the gguf model run the GGUF kernel and from which row count they dequantize their
  blocks for oneDNN's GEMM (--dequant-gemm-rows auto, the default: timed once per machine);
- prefill tok/s of one prompt of each of --prefills tokens, and decode tok/s at --batches (bench_forward.py's
  workload: equal prompts of --prompt-len tokens, one untimed EXTEND, then --decode-rounds timed greedy
  DECODE rounds), for minisgl bf16 dequantized (--quantization none), minisgl --quantization gguf as it
  runs (the product chosen per row count), the same with the GGUF kernel at every row count
  (--dequant-gemm-rows off), and transformers on the same dequantized weights in bf16 (skip with --no-hf),
  interleaved A, B, C, D, A, B, C, D, ... --repeats times, medians; above batch 1,
  one more transformers decode with a clock around each nn.Linear call: what share of its step its own
  products take, beside the length of a step at twice its speed;
- llama.cpp's batch-1 decode on the same GGUF file and thread count (--llama-python: a Python with
  llama-cpp-python installed, which is never a dependency of minisgl; build one outside the repository
  with `python3 -m venv ENV && ENV/bin/pip install llama-cpp-python`, which compiles llama.cpp). Each
  repeat starts that Python, which loads the file, evaluates the same prompt ids and times the same
  number of greedy one-token steps; it is interleaved with minisgl's batch-1 --quantization gguf run (its
  decode rounds replayed from the cpu graph) and the same weights run layer by layer (--disable-cpu-graph);
- greedy agreement on the five chat prompts of tests/conftest.py, --new-tokens each, one prompt at a
  time: the share of positions where the gguf model's token equals the dequantized bf16 model's, and the
  share before the first difference (after one, the two continue from different texts). The dequantized
  bf16 model against float32 (the exact reference) is printed beside it, for scale;
- memory: each model's tensors (weights, packed codes, scales), and the process RSS of a fresh process
  that loads only that model (its KV pool kept small) and prefills one 512-token prompt (so the scratch
  buffer of the dequantized products is in it): what a scheduler process holds for its model.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("TQDM_DISABLE", "1")

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_forward import (  # noqa: E402
    batch_prompts,
    engine_decode,
    engine_prefill,
    hf_decode,
    hf_generate,
    hf_prefill,
    load_hf_model,
    make_prompt,
    measure,
)

from minisgl import kernels  # noqa: E402
from minisgl.kernels import dequant_gemm  # noqa: E402
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
MODES = {"bf16": ("bfloat16", "none", "auto"), "bf16+gguf": ("bfloat16", "gguf", "auto"),
         "gguf kernel": ("bfloat16", "gguf", "off"), "fp32": ("float32", "none", "auto")}
LLAMA_CHILD = """
import json, sys, time
import numpy as np
import llama_cpp
path, threads, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
prompt = json.loads(sys.stdin.read())
llm = llama_cpp.Llama(model_path=path, n_threads=threads, n_threads_batch=threads, n_ctx=len(prompt) + rounds + 8,
                      n_batch=512, verbose=False)
llm.eval(prompt)
tok = int(np.argmax(llm.scores[llm.n_tokens - 1]))
t0 = time.perf_counter()
for _ in range(rounds):
    llm.eval([tok])
    tok = int(np.argmax(llm.scores[llm.n_tokens - 1]))
print(json.dumps({"seconds": time.perf_counter() - t0, "version": llama_cpp.__version__}))
"""
LLAMA_HOWTO = ("llama.cpp column skipped: give --llama-python PATH, a Python with llama-cpp-python, built outside "
               "this repository: python3 -m venv ENV && ENV/bin/pip install llama-cpp-python (compiles llama.cpp "
               "with cmake; ten minutes or more on two cores)")
# Seen with llama-cpp-python 0.3.36 built for this machine (-march=native) on a Xeon with AMX: the first eval
# dies of a general protection fault on ldtilecfg in libggml-cpu, whose tile configuration GCC 12 left
# mostly unwritten; built without the AMX kernels it runs.
LLAMA_CRASH = ("On a CPU with AMX, llama-cpp-python 0.3.36 built with -march=native by GCC 12 has crashed this way "
               "(GCC 12's _tile_loadconfig lets the compiler drop most of the tile configuration); build it "
               "without its AMX kernels: CMAKE_ARGS=\"-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON "
               "-DGGML_AVX512=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON\" ENV/bin/pip install --no-cache-dir "
               "llama-cpp-python")


def llama_decode(python: str, path: Path, threads: int, prompt: list[int], rounds: int) -> float:
    """Seconds for `rounds` greedy one-token steps of llama.cpp after `prompt`, in a child of `python`."""
    done = subprocess.run([python, "-c", LLAMA_CHILD, str(path), str(threads), str(rounds)],
                          input=json.dumps(prompt), capture_output=True, text=True, timeout=600)
    if done.returncode < 0:  # killed by a signal, before it could say anything
        raise RuntimeError(f"llama.cpp child killed by {signal.Signals(-done.returncode).name}. {LLAMA_CRASH}")
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"llama.cpp child failed: {tail}")
    out = json.loads(done.stdout.strip().splitlines()[-1])
    llama_decode.version = out["version"]
    return out["seconds"]


def hf_products(model, prompts: list[list[int]], rounds: int, pad_id: int) -> tuple[float, float]:
    """One more transformers decode, a clock around each of its nn.Linear calls: (seconds of `rounds` decode
    steps, seconds of them inside nn.Linear), both counted as hf_decode counts: generate(rounds + 1) minus
    generate(1). What its products cost bounds what any engine with the same products can gain on it."""
    spent, started = [0.0], {}

    def before(module, args):
        started[id(module)] = time.perf_counter()

    def after(module, args, out):
        spent[0] += time.perf_counter() - started.pop(id(module))

    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    handles = [h for m in linears for h in (m.register_forward_pre_hook(before), m.register_forward_hook(after))]
    try:
        hf_generate(model, prompts, 1, pad_id)  # warm-up: a first call's set-up must not land in t_one
        spent[0] = 0.0
        t_one, _ = hf_generate(model, prompts, 1, pad_id)
        in_one, spent[0] = spent[0], 0.0
        t_all, _ = hf_generate(model, prompts, rounds + 1, pad_id)
    finally:
        for h in handles:
            h.remove()
    return max(t_all - t_one, 1e-9), spent[0] - in_one


def load(model, mode: str, kv_tokens: int, batch: int) -> ModelRunner:
    """Each mode loads weights of its own: --dequant-gemm-rows lives in the quantized products."""
    dtype, quant, gemm_rows = MODES[mode]
    src = resolve_model(model)
    args = ServerArgs(model=model, dtype=dtype, quantization=quant, max_total_tokens=kv_tokens,
                      max_running_requests=batch, dequant_gemm_rows=gemm_rows)
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
    and after loading. It runs this process's thread count, whose product timings this process has kept,
    so it measures a start that reads them, as every start but a machine's first does."""
    cmd = [sys.executable, __file__, "--rss-of", mode, "--threads", str(torch.get_num_threads())] + \
        (["--model", model] if model else [])
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
    p.add_argument("--decode-rounds", type=int, default=16)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--batches", default="1,8,32,64", help="comma-separated decode batch sizes (default: 1,8,32,64)")
    p.add_argument("--prefills", default="128,512,2048",
                   help="comma-separated prompt lengths, one prefill each (default: 128,512,2048; none: '')")
    p.add_argument("--no-hf", action="store_true", help="skip the transformers column")
    p.add_argument("--no-bf16", action="store_true", help="skip the dequantized bf16 engine (its prefill of large "
                   "batches is slow on a CPU without bfloat16 instructions); implies --skip-agreement")
    p.add_argument("--llama-python", default=None,
                   help="a Python with llama-cpp-python installed (outside this repository): adds llama.cpp's "
                        "batch-1 decode on the same file and thread count")
    p.add_argument("--skip-agreement", action="store_true", help="skip the greedy agreement and memory parts")
    p.add_argument("--new-tokens", type=int, default=32, help="greedy tokens per chat prompt (default: 32)")
    p.add_argument("--rss-of", choices=list(MODES), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    if args.rss_of:  # the child of child_rss
        before = rss_mib()
        runner = load(args.model, args.rss_of, 1024, 1)
        engine_prefill(runner, make_prompt(load_tokenizer(resolve_model(args.model)), 512))
        print(json.dumps({"rss_mib": rss_mib(), "before_mib": before, "tensor_mib": tensor_mib(runner)}))
        return 0

    try:
        batches = [int(b) for b in args.batches.split(",")]
        prefills = [int(n) for n in args.prefills.split(",") if n]
    except ValueError:
        p.error(f"--batches and --prefills must be comma-separated numbers, not {args.batches!r}, "
                f"{args.prefills!r}")
    if args.llama_python and not Path(args.llama_python).exists():
        p.error(f"--llama-python {args.llama_python}: no such file")
    kv = max(max(batches) * (args.prompt_len + args.decode_rounds + 1) + 16, max(prefills, default=0) + 16)
    threads = torch.get_num_threads()
    print(f"torch {torch.__version__}, {threads} thread(s), cpu count {os.cpu_count()}, load average "
          f"{os.getloadavg()[0]:.1f}; GGUF products: {kernels.packed_loop()}", flush=True)
    if args.no_bf16:
        args.skip_agreement = True
    runners = {}
    for mode in [m for m in MODES if not (args.no_bf16 and m not in ("bf16+gguf", "gguf kernel"))]:
        t0 = time.perf_counter()
        runners[mode] = load(args.model, mode, max(kv, 1024), max(batches))
        print(f"loaded {mode:11s} in {time.perf_counter() - t0:4.1f}s, tensors {tensor_mib(runners[mode]):6.1f} "
              "MiB", flush=True)
    bf16, q, kernel_only = runners.get("bf16"), runners["bf16+gguf"], runners["gguf kernel"]
    print("\ngguf products (--dequant-gemm-rows auto): "
          + dequant_gemm.describe(dequant_gemm.model_products(q.model), q.dequant_gemm_rows), flush=True)
    src = resolve_model(args.model)
    tokenizer = load_tokenizer(src)
    hf = None if args.no_hf else load_hf_model(src)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    base = make_prompt(tokenizer, args.prompt_len)

    if prefills:
        print(f"\nprefill tok/s (one prompt, median of {args.repeats}, interleaved): bf16 = --quantization none, "
              "gguf = as it runs, kernel = the GGUF kernel at every row count")
    for n in prefills:
        prompt = make_prompt(tokenizer, n)
        engines = [r for r in (bf16, q, kernel_only) if r is not None]
        fns = [lambda r=r: engine_prefill(r, prompt) for r in engines]
        if hf is not None:
            fns.append(lambda: hf_prefill(hf, prompt))
        rate = dict(zip(["bf16"] * (bf16 is not None) + ["gguf", "kernel"] + ["transformers"] * (hf is not None),
                        (n / s for s, _ in measure(fns, args.repeats, "median"))))
        print(f"  {n:5d} tokens: " + "   ".join(f"{k} {v:7.1f}" for k, v in rate.items())
              + "   gguf: " + ", ".join(f"{rate['gguf'] / v:4.2f}x {k}" for k, v in rate.items() if k != "gguf"),
              flush=True)

    print(f"\ndecode tok/s ({args.decode_rounds} rounds after a {args.prompt_len}-token prompt, median of "
          f"{args.repeats}, interleaved; others' CPU share in brackets)")
    for b in batches:
        prompts = batch_prompts(base, b)
        engines = [r for r in (bf16, q, kernel_only) if r is not None]
        fns = [lambda r=r: engine_decode(r, prompts, args.decode_rounds)[0] for r in engines]
        if hf is not None:
            fns.append(lambda: hf_decode(hf, prompts, args.decode_rounds, pad)[0])
        res = measure(fns, args.repeats, "median")
        tok = b * args.decode_rounds
        rate = [tok / s for s, _ in res]
        if bf16 is None:
            rate.insert(0, None)
        busy = " ".join(f"[{o:.0%}]" if o is not None else "" for _, o in res)
        line = f"  batch {b:2d}: gguf {rate[1]:7.1f}   kernel {rate[2]:7.1f} ({rate[1] / rate[2]:4.2f}x)"
        if rate[0] is not None:
            line = (f"  batch {b:2d}: bf16 {rate[0]:7.1f}   gguf {rate[1]:7.1f} ({rate[1] / rate[0]:4.2f}x bf16)"
                    f"   kernel {rate[2]:7.1f} (gguf {rate[1] / rate[2]:4.2f}x)")
        if hf is not None:
            line += f"   transformers bf16 {rate[3]:7.1f} (gguf {rate[1] / rate[3]:4.2f}x)"
        print(f"{line}  {busy}", flush=True)
        if hf is not None and b > 1:  # what bounds the ratio: transformers' own products
            step, products = (t / args.decode_rounds * 1e3 for t in hf_products(hf, prompts, args.decode_rounds, pad))
            print(f"{'':12s}a step, ms: gguf {1e3 * b / rate[1]:6.1f}; transformers {step:6.1f} (clocked in a further "
                  f"run), {products:6.1f} of it in its nn.Linear products ({products / step:.0%}); 2x transformers: "
                  f"{step / 2:6.1f}", flush=True)

    if args.llama_python:
        # minisgl as it runs (its decode rounds replayed from a cpu graph, where one is on), the same weights
        # layer by layer (--disable-cpu-graph), and llama.cpp
        eager = ModelRunner(q.model_config, q.source, replace(q.server_args, disable_cpu_graph=True), model=q.model)
        res = measure([lambda: engine_decode(q, [base], args.decode_rounds)[0],
                       lambda: engine_decode(eager, [base], args.decode_rounds)[0],
                       lambda: llama_decode(args.llama_python, src.path, threads, base, args.decode_rounds)],
                      args.repeats, "median")
        ours, layered, theirs = (args.decode_rounds / s for s, _ in res)
        graph = "on" if q.graph_runner is not None else "off"
        print(f"\nbatch-1 decode vs llama.cpp (llama-cpp-python {llama_decode.version}, same file "
              f"{src.path.name}, {threads} thread(s), median of {args.repeats}, interleaved): minisgl gguf "
              f"{ours:6.1f} tok/s (cpu graph {graph}), llama.cpp {theirs:6.1f} tok/s, ratio {ours / theirs:4.2f}; "
              f"minisgl layer by layer (--disable-cpu-graph) {layered:6.1f} tok/s, ratio {layered / theirs:4.2f}",
              flush=True)
    else:
        print(f"\n{LLAMA_HOWTO}")
    if args.skip_agreement:
        return 0

    chats = [list(tokenizer.apply_chat_template([{"role": "user", "content": c}], add_generation_prompt=True,
                                                tokenize=True, return_dict=False)) for c in CHAT_PROMPTS]
    answers = {m: [greedy_generate(r, [c], args.new_tokens)[0] for c in chats] for m, r in runners.items()
               if m != "gguf kernel"}
    n = sum(len(a) for a in answers["bf16"])
    print(f"\ngreedy agreement on {len(chats)} chat prompts x {args.new_tokens} tokens ({n} tokens)")
    for x, y in (("bf16+gguf", "bf16"), ("bf16", "fp32"), ("bf16+gguf", "fp32")):
        same, prefix = agreement(answers[x], answers[y])
        print(f"  {x:10s} vs {y:5s}: {same:6.1%} of positions equal, {prefix:6.1%} before the first difference")

    print("\nprocess RSS of a fresh process loading one model (1,024-slot KV pool) and prefilling 512 tokens")
    for mode in ("bf16", "bf16+gguf", "gguf kernel"):
        r = child_rss(args.model, mode)
        if "error" in r:
            print(f"  {mode:11s}: not measured ({r['error']})")
        else:
            print(f"  {mode:11s}: {r['rss_mib']:6.1f} MiB ({r['rss_mib'] - r['before_mib']:6.1f} MiB more than "
                  f"after the imports; tensors {r['tensor_mib']:6.1f} MiB)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
