"""One decode step's matrix products, four or five ways, side by side in one run: minisgl's GGUF kernel,
minisgl's blocks dequantized into a bfloat16 scratch and multiplied by oneDNN's GEMM
(kernels/dequant_gemm.py), where the CPU has AMX minisgl's blocks made whole one tile at a time and
multiplied on the tiles (csrc/amx_linear.cpp), torch's bfloat16 F.linear on weights kept whole (what
transformers and `--quantization none` multiply with) and torch's int4 weight-only kernel
(`aten._weight_int4pack_mm_for_cpu`, minisgl's fall-back without a compiler). The engine runs the GGUF
kernel below each product's crossover and its blocks made whole from it (the tiles, then the GEMM from a
second crossover; --dequant-gemm-rows auto); the crossovers it chose on this machine are printed, and the
"chosen" column is what the engine's product costs at that row count.

    python benchmarks/bench_products.py                        # one thread, rows 1, 8, 32, 64
    python benchmarks/bench_products.py --rows 5,16 --repeats 31

A decode step of B requests multiplies B rows of x by every weight; a verify forward of speculation
multiplies K + 1 rows per request. Whether a step is fast is mostly whether these products are, so this
script times them alone, on the bundled model's own weights (layer 0's blocks, as the engine fuses them:
qkv_proj, o_proj, gate_up_proj, down_proj, and the tied lm_head in Q8_0). Each cell is the median of
--repeats calls, the three ways called in turn (A, B, C, A, B, C, ...), so a machine's slow minutes fall
on all of them. x is bfloat16 and random; the time does not depend on its values.

Printed per product and row count: milliseconds for each way, the GGUF kernel's time over the others',
and each way's largest difference from float32 (x @ W.T with the dequantized weights in float32), over
the largest output. Then one decode step's products (the layer's four times the number of layers, plus
lm_head): torch's int4 kernel takes Q4 blocks only, so its step multiplies lm_head with F.linear.

Where the CPU has AMX (Intel's tile unit, `amx_bf16` in /proc/cpuinfo), oneDNN runs F.linear's bfloat16
products on the tiles from a few rows on, and transformers' large batches with them (see the benchmarks
page). Weights of other GGUF types than Q4_0, Q4_1 and Q8_0 are refused with a message.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from minisgl import kernels  # noqa: E402
from minisgl.kernels import dequant_gemm  # noqa: E402
from minisgl.layers.quantization.gguf import INT4_TYPES, GGUFInt4Linear, decode_blocks  # noqa: E402
from minisgl.model_loader.bundled import bundled_model_path  # noqa: E402
from minisgl.model_loader.gguf_dequant import dequantize  # noqa: E402
from minisgl.model_loader.gguf_weights import read_gguf_config, read_gguf_linear_blocks  # noqa: E402

WAYS = ("gguf", "dequant+GEMM", "AMX tiles", "F.linear bf16", "int4pack")
FUSED = {  # the engine's product -> the checkpoint weights it stacks along N (models/llama.py)
    "qkv_proj": ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"),
    "o_proj": ("self_attn.o_proj",),
    "gate_up_proj": ("mlp.gate_proj", "mlp.up_proj"),
    "down_proj": ("mlp.down_proj",),
}


@dataclass
class Product:
    name: str
    ggml_type: int
    weight: torch.Tensor  # float32 [N, K], dequantized: the reference
    calls: dict = field(default_factory=dict)  # way -> fn(x) -> out, for the ways that take this type


def load_products(path: Path) -> tuple[list[Product], int]:
    """Layer 0's fused products and lm_head, each ready for every way that takes its type; and the number of
    layers (each has the same shapes, so one layer's times stand for all)."""
    config = read_gguf_config(path)
    blocks = read_gguf_linear_blocks(path, config)
    wanted = {name: [f"model.layers.0.{part}.weight" for part in parts] for name, parts in FUSED.items()}
    wanted["lm_head"] = ["lm_head.weight" if "lm_head.weight" in blocks else "model.embed_tokens.weight"]
    products = []
    for name, parts in wanted.items():
        types = {blocks[p][0] for p in parts}
        if len(types) != 1:
            raise SystemExit(f"{name}: its parts have different ggml types {sorted(types)}; this script stacks "
                             "one type")
        ggml_type = int(types.pop())
        if ggml_type not in kernels.BLOCK_BYTES:
            raise SystemExit(f"{name}: ggml type {ggml_type}; the GGUF kernels take Q4_0 (2), Q4_1 (3) and Q8_0 (8)")
        raw = np.concatenate([blocks[p][1] for p in parts])
        k = raw.shape[1] // kernels.BLOCK_BYTES[ggml_type] * 32
        weight = torch.from_numpy(np.asarray(dequantize(raw, ggml_type), np.float32).reshape(raw.shape[0], k))
        product = Product(name, ggml_type, weight)
        gguf = product.calls["gguf"] = kernels.block_linear(torch.from_numpy(raw), ggml_type)
        product.calls["dequant+GEMM"] = lambda x, f=gguf: dequant_gemm.gemm(x, f.packed, *f.shape)
        if dequant_gemm.amx_tiles():
            product.calls["AMX tiles"] = lambda x, f=gguf: dequant_gemm.tiles(x, f.packed, *f.shape)
        bf16 = weight.to(torch.bfloat16)
        product.calls["F.linear bf16"] = lambda x, w=bf16: torch.nn.functional.linear(x, w)
        if ggml_type in INT4_TYPES:  # minisgl's fall-back layer, as the engine builds it without the C++ kernels
            product.calls["int4pack"] = GGUFInt4Linear(decode_blocks(raw, ggml_type), None)
        products.append(product)
    return products, config.num_hidden_layers


def measure(products: list[Product], rows: list[int], repeats: int) -> list[dict]:
    """One record per product and row count: median ms per way, and each way's largest difference from the
    float32 product over the largest |output|."""
    gen = torch.Generator().manual_seed(0)
    records = []
    for product in products:
        for r in rows:
            x = torch.randn(r, product.weight.shape[1], generator=gen).to(torch.bfloat16)
            ref = x.float() @ product.weight.T
            record = {"product": product.name, "ggml_type": product.ggml_type, "rows": r, "ms": {}, "diff": {}}
            times: dict[str, list[float]] = {way: [] for way in product.calls}
            for way, call in product.calls.items():
                out = call(x)  # also the warm-up call
                record["diff"][way] = ((out.float() - ref).abs().max() / ref.abs().max()).item()
            for _ in range(repeats):
                for way, call in product.calls.items():
                    t0 = time.perf_counter()
                    call(x)
                    times[way].append(time.perf_counter() - t0)
            record["ms"] = {way: statistics.median(ts) * 1e3 for way, ts in times.items()}
            records.append(record)
    return records


def chosen_way(rec: dict, crossovers: dict[str, tuple]) -> str:
    """The way the engine runs this record's product at its row count (--dequant-gemm-rows auto)."""
    way = dequant_gemm.way(*crossovers[rec["product"]], rec["rows"])
    return {"gguf": "gguf", "tiles": "AMX tiles", "gemm": "dequant+GEMM"}[way]


def step_totals(records: list[dict], layers: int, crossovers: dict[str, tuple]) -> dict[int, dict]:
    """Per row count, one decode step's products in ms per way, and "chosen": the layer's products times
    `layers`, plus lm_head (with F.linear for a way that does not take lm_head's type). A way no product has
    here (the AMX tiles on a CPU without them) is left out."""
    present = [way for way in WAYS if any(way in rec["ms"] for rec in records)]
    totals: dict[int, dict[str, float]] = {}
    for rec in records:
        per_way = totals.setdefault(rec["rows"], {way: 0.0 for way in (*present, "chosen")})
        times = 1 if rec["product"] == "lm_head" else layers
        for way in present:
            per_way[way] += times * rec["ms"].get(way, rec["ms"]["F.linear bf16"])
        per_way["chosen"] += times * rec["ms"][chosen_way(rec, crossovers)]
    return totals


def amx_flags() -> str:
    try:
        words = Path("/proc/cpuinfo").read_text().split()
    except OSError:
        return "unknown (no /proc/cpuinfo)"
    found = sorted({w for w in words if w.startswith("amx_")})
    return " ".join(found) if found else "none"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, default=None, help="a .gguf file (default: the bundled SmolLM2 Q4_1)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    ap.add_argument("--rows", default="1,8,32,64", help="rows of x per product, comma-separated (default 1,8,32,64)")
    ap.add_argument("--repeats", type=int, default=15, help="timed calls per way and cell, median kept (default 15)")
    args = ap.parse_args(argv)
    if not kernels.load():
        raise SystemExit(f"the C++ kernels are unavailable: {kernels.unavailable_reason()}")
    try:
        rows = [int(r) for r in args.rows.split(",")]
    except ValueError:
        rows = []
    if not rows or min(rows) < 1 or args.repeats < 1 or args.threads < 1:
        raise SystemExit(f"--rows must be positive integers, comma-separated (not {args.rows!r}), and --repeats "
                         "and --threads at least 1")
    path = args.model or bundled_model_path()
    if path.suffix != ".gguf" or not path.is_file():
        raise SystemExit(f"--model {path}: not a .gguf file")
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {args.threads} thread(s), CPU capability "
          f"{torch.backends.cpu.get_cpu_capability()}, AMX: {amx_flags()}; GGUF products: {kernels.packed_loop()}",
          flush=True)
    products, layers = load_products(path)
    by_name = {p.name: [p.calls["gguf"]] for p in products}
    chosen = dequant_gemm.choose(by_name, "auto")
    crossovers = {name: (rows, by_name[name][0].onednn_rows) for name, rows in chosen.items()}
    print("--dequant-gemm-rows auto on this machine: " + dequant_gemm.describe(by_name, chosen), flush=True)
    records = measure(products, rows, args.repeats)
    print(f"\n{'product':13s} {'type':>4s} {'rows':>4s} " + " ".join(f"{w + ' ms':>14s}" for w in WAYS)
          + f" {'chosen':>12s} {'chosen/bf16':>11s}  largest difference from float32 (" + ", ".join(WAYS) + ")")
    names = {2: "Q4_0", 3: "Q4_1", 8: "Q8_0"}
    for rec in records:
        ms, way = rec["ms"], chosen_way(rec, crossovers)
        cells = " ".join(f"{ms[w]:14.3f}" if w in ms else f"{'-':>14s}" for w in WAYS)
        diffs = ", ".join(f"{rec['diff'][w]:.1e}" if w in rec["diff"] else "-" for w in WAYS)
        print(f"{rec['product']:13s} {names.get(rec['ggml_type'], rec['ggml_type']):>4} {rec['rows']:4d} {cells} "
              f"{way:>12s} {ms[way] / ms['F.linear bf16']:10.2f}x  {diffs}")
    print(f"\none decode step's products ({layers} layers x 4 products + lm_head), ms; int4pack's lm_head is F.linear")
    print(f"{'rows':>4s} " + " ".join(f"{w:>14s}" for w in (*WAYS, "chosen")) + f" {'chosen/bf16':>11s}")
    for r, t in step_totals(records, layers, crossovers).items():
        cells = (f"{t[w]:14.2f}" if w in t else f"{'-':>14s}" for w in (*WAYS, "chosen"))
        print(f"{r:4d} " + " ".join(cells)
              + f" {t['chosen'] / t['F.linear bf16']:10.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
