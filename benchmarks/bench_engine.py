"""End-to-end offline throughput: minisgl's Engine vs Hugging Face transformers, bf16, same weights.

    python benchmarks/bench_engine.py            # full run: 64 new tokens per prompt, 3 repeats
    python benchmarks/bench_engine.py --quick    # 16 new tokens per prompt, 1 repeat
    python benchmarks/bench_engine.py --json out.json
    python benchmarks/bench_engine.py --quick --threads 1   # on a loaded machine (see below)

Workloads
- throughput @ N: the first N of 64 distinct chat prompts (a short system message and a question on
  one of 16 topics, 20-200 tokens after the chat template), each generating exactly --max-new-tokens
  tokens (greedy, ignore_eos). minisgl: one Engine.generate() call with all N prompts (the scheduler
  admits, chunks and batches them as it likes); transformers: one static batch of all N prompts,
  left-padded with an attention mask, generate(do_sample=False, min_new_tokens=max_new_tokens). Both
  timed from the chat messages (templating and tokenizing included) to the output ids, prefill
  included. Throughput = completion tokens / wall seconds. The radix cache is flushed before every
  minisgl run, so no run reuses an earlier run's prompts (the prompts' own shared system message may
  still be served from the cache within a run: that is reported as "cached").
- varied lengths @ N: the same prompts, but each asks for its own number of new tokens, spread evenly
  over 1/4 .. 7/4 of --max-new-tokens (mean: --max-new-tokens), as real answers vary in length.
  minisgl lets each request finish at its own length and fills its place from the queue; transformers'
  static batch decodes until its longest row is done, and only each row's own tokens are counted.
  Continuous batching exists for exactly this workload.
- shared prefix: 16 requests with one ~300-token context paragraph as the system message and a short
  distinct question each, on the Engine with the radix cache on vs fork(disable_radix_cache=True).
  Reported: prefill tokens computed (sum of prompt_tokens - cached_tokens), tokens the cache saved,
  and wall time.

Each side is warmed up once with a tiny run; the sides are then run interleaved --repeats times, so a
burst of load from elsewhere hits both alike, and the best (or median) run is reported. Both sides run
in this process with the same torch thread count. This process's CPU seconds are reported next to wall
time: on a shared machine they are the steadier measure. On a machine whose load average exceeds its
core count, use --threads 1: oversubscribed OpenMP threads make every op wait for a descheduled peer,
and runs got 10-17x slower with 2 threads than with 1 on a loaded 2-core box (minisgl more than
transformers, so even the ratio is wrong there).
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

os.environ.setdefault("TQDM_DISABLE", "1")  # transformers' GGUF de-quantizing progress bar
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from bench_forward import CpuMeter, load_hf_model  # noqa: E402

from minisgl.entrypoints.engine import Engine  # noqa: E402
from minisgl.model_loader.loader import resolve_model  # noqa: E402

TARGET_RATIO_AT, TARGET_RATIO = 32, 2.0  # minisgl >= 2x transformers' static batching at 32 prompts
STRETCH_AT, STRETCH_TOK_S = 64, 1000.0  # stretch: >= 1,000 output tok/s at 64 prompts

# ---- prompts ----------------------------------------------------------------------------------------
SYSTEM = "Answer briefly."
TOPICS = [
    ("tides", "The tides rise and fall twice a day because the moon and the sun pull on the oceans, and "
              "the shape of each coastline makes the range of a tide large in one bay and small in the next."),
    ("bread", "Bread rises because yeast eats sugar and gives off carbon dioxide, which the stretchy gluten "
              "in kneaded dough traps in small bubbles until the oven sets the crumb."),
    ("volcanoes", "A volcano erupts when molten rock, lighter than the solid rock around it, pushes up "
                  "through cracks in the crust and the gas dissolved in it escapes as pressure drops."),
    ("bees", "Honey bees tell each other where flowers are with a waggle dance whose angle points toward "
             "the food and whose length says how far away it lies."),
    ("rainbows", "A rainbow appears when sunlight enters raindrops, bends, reflects off the back of each "
                 "drop and leaves again split into colours, each at its own angle."),
    ("compilers", "A compiler reads source code, checks it against the rules of the language, turns it into "
                  "an intermediate form it can optimise, and finally writes machine code for one processor."),
    ("chess", "In chess the opening develops the pieces and fights for the centre, the middle game turns on "
              "plans and tactics, and the endgame rewards an active king and passed pawns."),
    ("glaciers", "Glaciers form where more snow falls each winter than melts each summer, and the weight "
                 "of the packed ice makes it flow slowly downhill, carving valleys as it goes."),
    ("vaccines", "A vaccine shows the immune system a harmless piece or copy of a germ, so that it makes "
                 "antibodies and memory cells and can answer quickly when the real germ arrives."),
    ("bridges", "A suspension bridge hangs its deck from cables draped over tall towers, and the cables "
                "carry the load in tension to anchors buried in rock at either end."),
    ("photosynthesis", "Plants use the energy of sunlight to split water and join carbon dioxide into "
                       "sugar, releasing oxygen, in green chloroplasts packed into their leaves."),
    ("sailing", "A sailboat can sail toward the wind at an angle because its sail works like a wing and "
                "its keel resists being pushed sideways through the water."),
    ("coffee", "Coffee beans are the roasted seeds of a cherry, and the roast decides much of the taste: "
               "light roasts keep fruity acids while dark roasts taste bitter and smoky."),
    ("satellites", "A satellite stays in orbit because it moves sideways so fast that, while it falls "
                   "toward the earth, the curved surface falls away beneath it just as quickly."),
    ("libraries", "Public libraries lend books for free, and many now also lend tools, host classes, give "
                  "internet access and keep local records that would otherwise be lost."),
    ("earthquakes", "Earthquakes happen when stress built up along a fault in the crust is released "
                    "suddenly, sending waves through the ground that can travel around the planet."),
]
QUESTIONS = ["Explain {t} to a child.", "What should a student know about {t}?",
             "Give three facts about {t}.", "Why do {t} matter to people?"]
PROMPT_MIN_TOKENS, PROMPT_MAX_TOKENS = 20, 200

CONTEXT = (
    "You are the help desk assistant of the Riverside Community Library. Here is what you know. The library "
    "is open from nine in the morning to eight in the evening on weekdays, from ten to five on Saturdays, "
    "and it is closed on Sundays and public holidays. Anyone who lives, works or studies in the county may "
    "get a library card for free by bringing a photo identity document and proof of address to the front "
    "desk; children under twelve need a parent or guardian to sign for them. A card lets its holder borrow "
    "up to fifteen items at a time: books and audiobooks for three weeks, films and games for one week, and "
    "tools from the tool library, such as drills, sewing machines and telescopes, for one week. Items may "
    "be renewed twice online or by phone unless someone else has reserved them. There are no late fees on "
    "books for children, but adults pay twenty cents a day per overdue item, up to five dollars per item, "
    "and a lost item is charged at its replacement cost. The second floor has twelve study rooms that seat "
    "four to eight people; they can be booked up to two weeks ahead, for at most three hours a day. Public "
    "computers, printing at ten cents a page, scanning, and free wireless internet are available on every "
    "floor. The makerspace in the basement has two 3D printers, a laser cutter and a recording booth; using "
    "them requires a one-hour safety class, held every Tuesday evening. Story time for toddlers is on "
    "Wednesday and Friday mornings, homework help for school children runs every weekday afternoon, and an "
    "English conversation club meets on Thursday evenings. Answer the patron's question in one or two "
    "sentences, using only these facts."
)
SHARED_QUESTIONS = [
    "Are you open on Sunday?", "How long can I keep a film?", "Can my eight-year-old get a card?",
    "How much is a late fee for a novel?", "Can I borrow a telescope?", "How do I book a study room?",
    "What does printing cost?", "When is story time?", "Is there homework help?",
    "How many items can I borrow?", "Can I use the laser cutter today?", "What if I lose a book?",
    "When does the library close on Saturday?", "Can I renew a book three times?",
    "Is the wifi free?", "Where is the recording booth?",
]
SHARED_N = len(SHARED_QUESTIONS)


def n_tokens(tokenizer, messages: list[dict]) -> int:
    """Prompt length exactly as the Engine counts it (chat template, then encode without extras)."""
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return len(tokenizer.encode(text, add_special_tokens=False))


def chat(user: str, system: str = SYSTEM) -> list[dict]:
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def make_chat_prompts(tokenizer, n: int = 64) -> list[list[dict]]:
    """n distinct chat prompts whose templated lengths spread over 20-200 tokens, in a shuffled order
    (so the first N for any N mix short and long ones). Deterministic."""
    prompts = []
    for i in range(n):
        topic, text = TOPICS[i % len(TOPICS)]
        question = QUESTIONS[(i // len(TOPICS)) % len(QUESTIONS)].format(t=topic)
        # target length: an even spread over the range, visited in a scrambled order (37 is coprime to 64)
        step = (i * 37) % n
        target = PROMPT_MIN_TOKENS + round(step * (PROMPT_MAX_TOKENS - PROMPT_MIN_TOKENS) / max(n - 1, 1))
        words = (text + " ") * 6
        words = words.split()

        def build(k: int) -> list[dict]:
            body = " ".join(words[:k])
            return chat(f"{question} {body}".strip() if k else question)

        lo, hi = 0, len(words)  # the longest prefix of the background text that stays within the target
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if n_tokens(tokenizer, build(mid)) <= target:
                lo = mid
            else:
                hi = mid - 1
        prompts.append(build(lo))
    return prompts


def make_shared_prompts() -> list[list[dict]]:
    return [chat(q, system=CONTEXT) for q in SHARED_QUESTIONS]


# ---- minisgl ----------------------------------------------------------------------------------------
def output_lengths(n: int, max_new: int, workload: str) -> list[int]:
    """New tokens per prompt: all max_new ("fixed"), or spread over max_new/4 .. 7*max_new/4 in a
    scrambled order ("varied": mean max_new, so both workloads ask for about the same total)."""
    if workload == "fixed" or n == 1:
        return [max_new] * n
    lo, hi = max(1, max_new // 4), max(1, 7 * max_new // 4)
    return [lo + ((i * 37) % n) * (hi - lo) // (n - 1) for i in range(n)]


def engine_run(engine: Engine, prompts: list[list[dict]], lengths: list[int]) -> dict:
    """One Engine.generate() of all prompts, each with its own max_new_tokens, from a flushed radix cache."""
    if not engine.flush_cache():
        raise RuntimeError("the engine was not idle before a run")
    params = [{"max_new_tokens": n, "temperature": 0.0, "ignore_eos": True} for n in lengths]
    t0, c0 = time.perf_counter(), time.process_time()
    results = engine.generate(prompts, params)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    usage = [r["usage"] for r in results]
    return {
        "wall_s": wall, "cpu_s": cpu,
        "completion_tokens": sum(u["completion_tokens"] for u in usage),
        "prompt_tokens": sum(u["prompt_tokens"] for u in usage),
        "cached_tokens": sum(u["cached_tokens"] for u in usage),
        "output_ids": [r["output_ids"] for r in results],
        "warnings": [r["warning"] for r in results if "warning" in r],
    }


# ---- transformers -----------------------------------------------------------------------------------
@torch.inference_mode()
def hf_run(model, tokenizer, prompts: list[list[dict]], lengths: list[int], pad_id: int) -> dict:
    """One static batch: all prompts left-padded together, generate() until the longest row is done;
    each row then keeps only its own number of tokens (the rest were computed and thrown away)."""
    max_new = max(lengths)
    t0, c0 = time.perf_counter(), time.process_time()
    texts = [tokenizer.apply_chat_template(p, add_generation_prompt=True, tokenize=False) for p in prompts]
    rows = [tokenizer.encode(t, add_special_tokens=False) for t in texts]
    width = max(len(r) for r in rows)
    ids = torch.tensor([[pad_id] * (width - len(r)) + r for r in rows], dtype=torch.int64)
    mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows], dtype=torch.int64)
    out = model.generate(
        input_ids=ids,
        attention_mask=mask,
        do_sample=False,
        max_new_tokens=max_new,
        min_new_tokens=max_new,
        pad_token_id=pad_id,
        use_cache=True,
    )
    new = out[:, width:].tolist()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    if any(len(r) != max_new for r in new):
        raise RuntimeError(f"transformers generated {set(map(len, new))} tokens per row, not {max_new}")
    new = [r[:n] for r, n in zip(new, lengths)]
    return {
        "wall_s": wall, "cpu_s": cpu,
        "completion_tokens": sum(len(r) for r in new),
        "decoded_tokens": max_new * len(rows),
        "prompt_tokens": sum(len(r) for r in rows),
        "padded_tokens": width * len(rows),
        "output_ids": new,
    }


# ---- driver -----------------------------------------------------------------------------------------
def interleaved(fns: list, repeats: int, reduce: str) -> list[dict]:
    """Run fns (each returns a result dict with wall_s) interleaved `repeats` times; per fn the best or
    median run by wall time, with the share of the CPUs other processes used while it ran."""
    runs: list[list[dict]] = [[] for _ in fns]
    for rep in range(repeats):
        order = list(range(len(fns)))
        if rep % 2:
            order.reverse()  # alternate who goes first
        for i in order:
            meter = CpuMeter()
            res = fns[i]()
            res["others_cpu_share"] = meter.others_share()
            runs[i].append(res)
    out = []
    for r in runs:
        r = sorted(r, key=lambda x: x["wall_s"])
        pick = r[0] if reduce == "best" else r[(len(r) - 1) // 2]
        pick["all_wall_s"] = [round(x["wall_s"], 3) for x in r]
        out.append(pick)
    return out


def prefix_agreement(a: list[list[int]], b: list[list[int]]) -> float:
    """Share of tokens that match before each row's first divergence (greedy bf16 runs can part after a
    near-tie; after that the rest of the row is a different continuation)."""
    same = total = 0
    for x, y in zip(a, b):
        total += len(x)
        for s, t in zip(x, y):
            if s != t:
                break
            same += 1
    return same / total if total else 1.0


def fmt_share(x: float | None) -> str:
    return "-" if x is None else f"{x:.0%}"


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="End-to-end offline throughput of minisgl's Engine vs transformers' static batching "
        "(bf16, same weights, same thread count), and the radix cache on a shared-prefix workload.",
        epilog=f"targets: >= {TARGET_RATIO:g}x transformers at {TARGET_RATIO_AT} prompts; stretch: >= "
        f"{STRETCH_TOK_S:,.0f} output tok/s at {STRETCH_AT} prompts (both for the full mode's 64 new tokens).",
    )
    p.add_argument("--quick", action="store_true",
                   help="16 new tokens per prompt and 1 repeat (the targets are defined for the full mode)")
    p.add_argument("--model", default=None, help="a .gguf file or Hugging Face folder (default: the bundled SmolLM2)")
    p.add_argument("--threads", type=int, default=None,
                   help="torch threads for both sides (default: torch's own, usually the core count)")
    p.add_argument("--batches", default="1,8,32,64",
                   help="comma-separated prompt counts for the throughput workload, each <= 64 (default: 1,8,32,64)")
    p.add_argument("--max-new-tokens", type=int, default=None,
                   help="tokens generated per prompt (default: 64, or 16 with --quick)")
    p.add_argument("--repeats", type=int, default=None,
                   help="timed repeats per workload after one warm-up (default: 3, or 1 with --quick)")
    p.add_argument("--reduce", choices=["median", "best"], default="best",
                   help="how repeats are combined (default: best, the least disturbed on a shared machine)")
    p.add_argument("--workloads", default="fixed,varied",
                   help="comma-separated: fixed (every prompt gets --max-new-tokens) and/or varied (each "
                        "its own length, mean --max-new-tokens) (default: fixed,varied)")
    p.add_argument("--skip-hf", action="store_true", help="measure minisgl only")
    p.add_argument("--skip-shared-prefix", action="store_true", help="skip the shared-prefix workload")
    p.add_argument("--json", metavar="PATH", default=None, help="also write the results as JSON to PATH")
    args = p.parse_args(argv)
    if args.max_new_tokens is None:
        args.max_new_tokens = 16 if args.quick else 64
    if args.repeats is None:
        args.repeats = 1 if args.quick else 3
    args.batch_sizes = [int(b) for b in args.batches.split(",") if b.strip()]
    args.workload_list = [w.strip() for w in args.workloads.split(",") if w.strip()]
    if not args.workload_list or any(w not in ("fixed", "varied") for w in args.workload_list):
        p.error("--workloads: choose from fixed, varied")
    if not args.batch_sizes or any(not 1 <= b <= 64 for b in args.batch_sizes):
        p.error("--batches: each prompt count must be in 1..64")
    if args.max_new_tokens < 1 or args.repeats < 1:
        p.error("--max-new-tokens and --repeats must be >= 1")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    threads = torch.get_num_threads()
    torch.manual_seed(0)
    max_new = args.max_new_tokens
    n_max = max(args.batch_sizes)

    src = resolve_model(args.model)
    load_start = os.getloadavg()[0]
    print(f"torch {torch.__version__}, {threads} thread(s) for both sides, cpu count {os.cpu_count()}, "
          f"load average {load_start:.1f}, {'quick' if args.quick else 'full'} mode", flush=True)

    # the KV pool holds the biggest workload whole (no retraction), plus a margin
    t0 = time.perf_counter()
    probe = Engine(args.model, dtype="bfloat16", max_total_tokens=64, max_running_requests=1)
    tokenizer = probe.tokenizer
    prompts = make_chat_prompts(tokenizer, 64)
    shared = make_shared_prompts()
    lens = [n_tokens(tokenizer, p) for p in prompts]
    shared_lens = [n_tokens(tokenizer, p) for p in shared]
    longest = max(output_lengths(n_max, max_new, "varied"))
    kv_tokens = max(sum(lens[:n_max]) + n_max * longest, sum(shared_lens) + SHARED_N * max_new) + 256
    engine = probe.fork(max_total_tokens=kv_tokens, max_running_requests=max(n_max, SHARED_N))
    del probe
    sa = engine.server_args
    print(f"model: {src.path.name}; minisgl loaded in {time.perf_counter() - t0:.1f}s "
          f"(KV pool {kv_tokens} tokens, chunked_prefill_size {sa.chunked_prefill_size}, "
          f"max_prefill_tokens {sa.max_prefill_tokens}, schedule_policy {sa.schedule_policy})", flush=True)
    print(f"prompts: 64 distinct chat prompts, {min(lens)}-{max(lens)} tokens (mean {sum(lens) / len(lens):.0f}); "
          f"shared prefix: {SHARED_N} prompts of {min(shared_lens)}-{max(shared_lens)} tokens; "
          f"{max_new} new tokens each, greedy, ignore_eos", flush=True)

    hf_model = None
    if not args.skip_hf:
        hf_model = load_hf_model(src)
    eos = engine.model_config.eos_token_ids or [0]
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos[0]
    if threads != torch.get_num_threads():  # a loader must not have changed it under us
        torch.set_num_threads(threads)

    # warm-up: one tiny run per side
    tiny = [chat("Say hi."), chat("Name a colour.")]
    engine_run(engine, tiny, [2, 2])
    if hf_model is not None:
        hf_run(hf_model, tokenizer, tiny, [2, 2], pad_id)

    # ---- throughput ----
    rows: list[dict] = []
    print("\nthroughput (output tok/s, prefill included):", flush=True)
    for workload, n in [(w, n) for w in args.workload_list for n in args.batch_sizes]:
        batch, lengths = prompts[:n], output_lengths(n, max_new, workload)
        fns = [lambda: engine_run(engine, batch, lengths)]
        if hf_model is not None:
            fns.append(lambda: hf_run(hf_model, tokenizer, batch, lengths, pad_id))
        res = interleaved(fns, args.repeats, args.reduce)
        eng = res[0]
        hf = res[1] if len(res) > 1 else None
        if eng["completion_tokens"] != sum(lengths):
            print(f"  warning: minisgl generated {eng['completion_tokens']} tokens, not {sum(lengths)}: "
                  f"{eng['warnings'][:1]}", flush=True)
        eng_tps = eng["completion_tokens"] / eng["wall_s"]
        hf_tps = hf["completion_tokens"] / hf["wall_s"] if hf else None
        row = {
            "workload": workload, "prompts": n, "prompt_tokens": eng["prompt_tokens"], "completion_tokens": eng["completion_tokens"],
            "minisgl_tok_s": round(eng_tps, 2), "minisgl_wall_s": round(eng["wall_s"], 3),
            "minisgl_cpu_s": round(eng["cpu_s"], 3), "minisgl_cached_tokens": eng["cached_tokens"],
            "minisgl_runs_wall_s": eng["all_wall_s"],
            "transformers_tok_s": round(hf_tps, 2) if hf else None,
            "transformers_wall_s": round(hf["wall_s"], 3) if hf else None,
            "transformers_cpu_s": round(hf["cpu_s"], 3) if hf else None,
            "transformers_padded_tokens": hf["padded_tokens"] if hf else None,
            "transformers_decoded_tokens": hf["decoded_tokens"] if hf else None,
            "transformers_runs_wall_s": hf["all_wall_s"] if hf else None,
            "ratio": round(eng_tps / hf_tps, 3) if hf else None,
            "greedy_prefix_agreement": round(prefix_agreement(eng["output_ids"], hf["output_ids"]), 4) if hf else None,
            "others_cpu_share": [None if x is None else round(x, 3)
                                 for x in (eng["others_cpu_share"], hf["others_cpu_share"] if hf else None)],
        }
        rows.append(row)
        hf_txt = f"{hf_tps:8.1f} tok/s ({hf['wall_s']:.2f}s)" if hf else "-"
        ratio_txt = f"{row['ratio']:.2f}x" if hf else "-"
        print(f"  {workload:<6} N={n:<3} minisgl {eng_tps:8.1f} tok/s ({eng['wall_s']:.2f}s)   transformers {hf_txt}   "
              f"ratio {ratio_txt}   (others' CPU share: {' / '.join(map(fmt_share, row['others_cpu_share']))})",
              flush=True)

    # ---- shared prefix ----
    shared_rows: list[dict] = []
    agree_shared = None
    if not args.skip_shared_prefix:
        print(f"\nshared prefix ({SHARED_N} requests):", flush=True)
        nocache = engine.fork(disable_radix_cache=True)
        engine_run(nocache, tiny, [2, 2])  # warm the fresh pools
        res = interleaved([lambda: engine_run(engine, shared, [max_new] * SHARED_N),
                          lambda: engine_run(nocache, shared, [max_new] * SHARED_N)],
                          args.repeats, args.reduce)
        for label, r in zip(("radix cache on", "radix cache off"), res):
            computed = r["prompt_tokens"] - r["cached_tokens"]
            shared_rows.append({
                "config": label, "prompt_tokens": r["prompt_tokens"], "prefill_computed": computed,
                "prefill_saved": r["cached_tokens"], "wall_s": round(r["wall_s"], 3), "cpu_s": round(r["cpu_s"], 3),
                "output_tok_s": round(r["completion_tokens"] / r["wall_s"], 2), "runs_wall_s": r["all_wall_s"],
                "others_cpu_share": None if r["others_cpu_share"] is None else round(r["others_cpu_share"], 3),
            })
            print(f"  {label:<16} computed {computed:6d}  saved {r['cached_tokens']:6d}  wall {r['wall_s']:.2f}s  "
                  f"(others' CPU share: {fmt_share(r['others_cpu_share'])})", flush=True)
        agree_shared = prefix_agreement(res[0]["output_ids"], res[1]["output_ids"])
        nocache.shutdown()

    # ---- tables ----
    print()
    print(f"Throughput: {max_new} new tokens per prompt (fixed) or {max_new // 4}-{7 * max_new // 4} "
          f"(varied), greedy, bf16, {threads} thread(s); {args.repeats} repeat(s), {args.reduce}")
    header = (f"| {'workload':<8} | {'prompts':>7} | {'minisgl tok/s':>13} | {'transformers tok/s':>18} | {'ratio':>6} "
              f"| {'minisgl wall s':>14} | {'transformers wall s':>19} | {'minisgl CPU s':>13} "
              f"| {'transformers CPU s':>18} |")
    print(header)
    print("|" + "|".join("-" * len(c) for c in header.split("|")[1:-1]) + "|")
    for r in rows:
        hf = r["transformers_tok_s"] is not None
        print(f"| {r['workload']:<8} | {r['prompts']:>7} | {r['minisgl_tok_s']:>13.1f} | "
              f"{format(r['transformers_tok_s'], '.1f') if hf else '-':>18} | "
              f"{format(r['ratio'], '.2f') + 'x' if hf else '-':>6} | {r['minisgl_wall_s']:>14.2f} | "
              f"{format(r['transformers_wall_s'], '.2f') if hf else '-':>19} | {r['minisgl_cpu_s']:>13.2f} | "
              f"{format(r['transformers_cpu_s'], '.2f') if hf else '-':>18} |")

    targets = {}
    for workload in args.workload_list:
        at32 = next((r for r in rows if r["workload"] == workload and r["prompts"] == TARGET_RATIO_AT), None)
        at64 = next((r for r in rows if r["workload"] == workload and r["prompts"] == STRETCH_AT), None)
        if at32 is not None and at32["ratio"] is not None:
            met = at32["ratio"] >= TARGET_RATIO
            targets[f"ratio_at_32_{workload}"] = {"target": TARGET_RATIO, "value": at32["ratio"], "met": met}
            print(f"target  ({workload}): >= {TARGET_RATIO:g}x transformers' static batching at {TARGET_RATIO_AT} "
                  f"prompts: {at32['ratio']:.2f}x -> {'met' if met else 'NOT met'}")
        if at64 is not None:
            v = at64["minisgl_tok_s"]
            targets[f"tok_s_at_64_{workload}"] = {"target": STRETCH_TOK_S, "value": v, "met": v >= STRETCH_TOK_S}
            print(f"stretch ({workload}): >= {STRETCH_TOK_S:,.0f} output tok/s at {STRETCH_AT} prompts: "
                  f"{v:.1f} tok/s -> {'met' if v >= STRETCH_TOK_S else 'NOT met'}")
    if args.quick:
        print(f"(quick mode: {max_new} new tokens make the runs prefill-heavy; the targets are for the full mode)")
    if any(r["greedy_prefix_agreement"] is not None for r in rows):
        print("greedy agreement minisgl vs transformers (tokens before first divergence): "
              + ", ".join(f"{r['workload']} N={r['prompts']}: {r['greedy_prefix_agreement']:.0%}" for r in rows))
    cached = [r for r in rows if r["minisgl_cached_tokens"]]
    if cached:
        print("minisgl prompt tokens served by the radix cache within a run (the shared system message): "
              + ", ".join(f"{r['workload']} N={r['prompts']}: {r['minisgl_cached_tokens']}/{r['prompt_tokens']}"
                          for r in cached))

    if shared_rows:
        print()
        print(f"Shared prefix: {SHARED_N} requests, {min(shared_lens)}-{max(shared_lens)} prompt tokens each "
              f"(a common context + a distinct question), {max_new} new tokens each")
        header = (f"| {'config':<15} | {'prompt tokens':>13} | {'prefill computed':>16} | {'saved by cache':>14} "
                  f"| {'wall s':>7} | {'CPU s':>7} | {'output tok/s':>12} |")
        print(header)
        print("|" + "|".join("-" * len(c) for c in header.split("|")[1:-1]) + "|")
        for r in shared_rows:
            print(f"| {r['config']:<15} | {r['prompt_tokens']:>13} | {r['prefill_computed']:>16} | "
                  f"{r['prefill_saved']:>14} | {r['wall_s']:>7.2f} | {r['cpu_s']:>7.2f} | {r['output_tok_s']:>12.1f} |")
        on, off = shared_rows
        print(f"radix cache: {on['prefill_saved'] / on['prompt_tokens']:.0%} of prefill tokens saved, "
              f"wall time {off['wall_s'] / on['wall_s']:.2f}x faster; greedy agreement cache on vs off: "
              f"{agree_shared:.0%}")

    load = os.getloadavg()[0]
    if threads > 1 and load > (os.cpu_count() or 1):
        print(f"warning: load average {load:.1f} on {os.cpu_count()} cores with {threads} torch threads: "
              "oversubscribed OpenMP threads wait on each other at every op, which can slow both sides "
              "(minisgl, with more and smaller ops, more so) by 10x or more; use --threads 1 here, or an idle machine")
    shares = [x for r in rows for x in r["others_cpu_share"] if x is not None]
    shares += [r["others_cpu_share"] for r in shared_rows if r["others_cpu_share"] is not None]
    if shares and max(shares) > 0.05:
        print(f"warning: other processes used up to {max(shares):.0%} of the CPUs during the runs; wall-time "
              "numbers are low and noisy (CPU seconds are steadier); rerun on an idle machine")

    if args.json:
        doc = {
            "model": src.path.name,
            "dtype": "bfloat16",
            "threads": threads,
            "cpu_count": os.cpu_count(),
            "load_average": [round(x, 2) for x in (load_start, os.getloadavg()[0])],
            "mode": "quick" if args.quick else "full",
            "torch": torch.__version__,
            "transformers": None if hf_model is None else __import__("transformers").__version__,
            "python": platform.python_version(),
            "max_new_tokens": max_new,
            "repeats": args.repeats,
            "reduce": args.reduce,
            "engine_args": {k: getattr(sa, k) for k in ("max_total_tokens", "max_running_requests",
                                                        "chunked_prefill_size", "max_prefill_tokens",
                                                        "schedule_policy", "enable_mixed_chunk")},
            "prompt_lengths": lens,
            "throughput": rows,
            "shared_prefix": {"requests": SHARED_N, "prompt_lengths": shared_lens, "rows": shared_rows,
                              "greedy_prefix_agreement": None if agree_shared is None else round(agree_shared, 4)},
            "targets": targets,
        }
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(doc, indent=2) + "\n")
        print(f"wrote {args.json}")
    engine.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
