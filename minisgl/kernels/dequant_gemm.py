"""Above a few rows, a GGUF layer's blocks made whole in bfloat16: on AMX's tiles, or for oneDNN's GEMM.

The GGUF kernels (csrc/q4_linear.cpp, q8_0_linear.cpp) read 4 or 8 bits a weight and multiply every row of
x by it in integers: at batch 1 a product only streams its weights, and fewer bytes win. With more rows the
same weights serve many rows, and how fast the multiply-adds run decides. There oneDNN's bfloat16 GEMM (on
AMX tiles where the CPU has them) beats the integer loop, and llama.cpp switches too: above a batch size it
dequantizes and calls a GEMM. So does minisgl, per product and row count:

- `gemm(x, ...)`: each tile of up to TILE_BYTES of the weight is dequantized (csrc/dequant.cpp) into one
  scratch buffer per thread, reused by every layer, and multiplied with F.linear's own product. The weights
  are the ones `--quantization none` multiplies with, bit for bit (gguf's float32 value, rounded to the
  nearest bfloat16), so the products are exact against them; no second copy of the model is kept.
- `choose(products, setting)`: from which row count each product leaves the GGUF kernel, and from which
  the tiles give way to the GEMM. `auto` times the ways on this machine, once per product shape and thread
  count (product_timing.py), and keeps the answers in the kernels' cache folder, so every later start (and
  every process of a server) chooses the same.

- `tiles(x, ...)`: where the CPU has AMX (and Linux lends it), the blocks of 16 columns are made whole one
  at a time into a B tile in L1 and multiplied on AMX's bfloat16 tiles (csrc/amx_linear.cpp): no weight
  written out and read back, so from a few rows to a few hundred it beats oneDNN on whole weights. Its
  sums are float32 in the tiles' order: the product equals F.linear's to bfloat16 rounding.
- `multiply(x, product)`: the way a product of `gemm_rows` rows or more runs: the tiles below
  `product.onednn_rows` (where the CPU has them), dequantize + GEMM from there.

Below the crossover the GGUF kernel runs, and a row's result there never depends on its batch; nor on the
tiles, whose rows are summed apart. oneDNN's GEMM is the exception (as on a GPU): there the same prompt may
round differently alone and in a batch of 512.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import os
import threading

import torch
import torch.nn.functional as F

from minisgl import kernels

logger = logging.getLogger(__name__)

TILE_BYTES = 4 << 20  # the most of one weight made whole at a time: SmolLM2's largest layer fits in one tile
_scratch = threading.local()  # each thread's bfloat16 scratch buffer (`buf`), gone with its thread
NAMES = {kernels.Q4_0: "q4_0", kernels.Q4_1: "q4_1", kernels.Q8_0: "q8_0"}


def tile_columns(n: int, k: int) -> int:
    """Output columns per tile: as many whole groups of the packed layout as TILE_BYTES holds, at most n."""
    group = kernels._group
    return min(n, max(group, TILE_BYTES // (2 * k) // group * group))


def scratch(elements: int) -> torch.Tensor:
    """This thread's scratch buffer, grown to at least `elements` bfloat16 values (never shrunk)."""
    buf = getattr(_scratch, "buf", None)
    if buf is None or buf.numel() < elements:
        buf = _scratch.buf = torch.empty(elements, dtype=torch.bfloat16)
    return buf


def dequantize(packed: torch.Tensor, ggml_type: int, k: int, n0: int, n1: int, out: torch.Tensor) -> None:
    """Columns n0 .. n1 - 1 of the weight (rows of `out`, bfloat16 [n1 - n0, k]); n0 a multiple of the
    packed group."""
    assert out.dtype == torch.bfloat16 and out.is_contiguous() and out.numel() >= (n1 - n0) * k
    assert n0 % kernels._group == 0 and 0 <= n0 < n1
    kernels._lib.dequant_bf16(packed.data_ptr(), out.data_ptr(), n0, n1, k, ggml_type,
                              torch.get_num_threads())


def weight(packed: torch.Tensor, ggml_type: int, n: int, k: int) -> torch.Tensor:
    """The whole weight, bfloat16 [n, k], in a tensor of its own (for tests and benchmarks)."""
    out = torch.empty(n, k, dtype=torch.bfloat16)
    dequantize(packed, ggml_type, k, 0, n, out)
    return out


def gemm(x: torch.Tensor, packed: torch.Tensor, ggml_type: int, n: int, k: int) -> torch.Tensor:
    """x [..., k] (bfloat16, contiguous) @ W.T, W dequantized tile by tile. While a CPU graph records
    (kernels/graph.py), the product is recorded as one torch step on the same tensors."""
    rows = x.numel() // k
    x2 = x.view(rows, k)
    out = torch.empty(rows, n, dtype=torch.bfloat16)
    cols = tile_columns(n, k)
    buf = scratch(cols * k)

    def run() -> None:
        for n0 in range(0, n, cols):
            n1 = min(n, n0 + cols)
            w = buf[: (n1 - n0) * k].view(n1 - n0, k)
            dequantize(packed, ggml_type, k, n0, n1, w)
            if n1 - n0 == n:
                torch.mm(x2, w.t(), out=out)  # F.linear(x2, w)'s product, into out
            else:
                out[:, n0:n1] = F.linear(x2, w)

    _run_as_step(run, keep=(x, out, packed, buf))
    return out.view(*x.shape[:-1], n)


def _run_as_step(run, keep: tuple) -> None:
    """Run a product; while a CPU graph records in this thread (kernels/graph.py), also record it as a torch
    step, keeping alive the tensors its replays read and write."""
    run()
    if kernels._recorders:
        recorder = kernels._recorders.get(threading.get_ident())
        if recorder is not None:
            recorder.add_step(run, keep=keep)


AMX_ENV = "MINISGL_AMX_TILES"  # 0: never the tiles (dequantize + GEMM instead), e.g. on a VM that faults
ONEDNN_ISA_ENV = "ONEDNN_MAX_CPU_ISA"  # oneDNN's own limit (e.g. AVX512_CORE_BF16: a CPU without AMX)


def onednn_isa() -> str | None:
    """The instruction set oneDNN is limited to (ONEDNN_MAX_CPU_ISA, upper case), None where it is not."""
    isa = os.environ.get(ONEDNN_ISA_ENV, "").strip().upper()
    return isa if isa and isa not in ("ALL", "DEFAULT") else None


@functools.cache
def amx_tiles() -> bool:
    """Whether the products may run on AMX's bfloat16 tiles here: the CPU has them, the kernels were built for
    them, Linux granted this process their state, MINISGL_AMX_TILES is not 0, and oneDNN is not limited to
    an instruction set below AMX (so ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16 runs the whole process as on a CPU
    without AMX, e.g. an AMD EPYC)."""
    isa = onednn_isa()
    if os.environ.get(AMX_ENV, "1") == "0" or (isa and "AMX" not in isa) or not kernels.load():
        return False
    lib, p, i = kernels._lib, ctypes.c_void_p, ctypes.c_int64
    lib.amx_ready.argtypes, lib.amx_ready.restype = [], ctypes.c_int
    lib.amx_linear_bf16.argtypes = [p, p, p, i, i, i, ctypes.c_int, ctypes.c_int]
    lib.amx_linear_bf16.restype = None
    return bool(lib.amx_ready())


def tiles(x: torch.Tensor, packed: torch.Tensor, ggml_type: int, n: int, k: int) -> torch.Tensor:
    """x [..., k] (bfloat16, contiguous) @ W.T on AMX's tiles, each block made whole in L1 (amx_tiles() must
    be true). Recorded by a CPU graph as one step, like gemm."""
    assert x.dtype == torch.bfloat16 and x.is_contiguous()
    rows = x.numel() // k
    out = torch.empty(*x.shape[:-1], n, dtype=torch.bfloat16)

    def run() -> None:
        kernels._lib.amx_linear_bf16(x.data_ptr(), packed.data_ptr(), out.data_ptr(), rows, n, k, ggml_type,
                                     torch.get_num_threads())

    _run_as_step(run, keep=(x, out, packed))
    return out


def way(gemm_rows: int | None, onednn_rows: int | None, rows: int) -> str:
    """How a product with these crossovers multiplies bfloat16 x of `rows` rows: "gguf" (its kernel),
    "tiles" (AMX, where the CPU has them) or "gemm" (dequantize + GEMM)."""
    if gemm_rows is None or rows < gemm_rows:
        return "gguf"
    return "tiles" if amx_tiles() and (onednn_rows is None or rows < onednn_rows) else "gemm"


def multiply(x: torch.Tensor, product) -> torch.Tensor:
    """A kernels.block_linear product of bfloat16 x with at least `product.gemm_rows` rows: on the tiles
    below `product.onednn_rows` rows (None: at every row count) where the CPU has them, else dequantize +
    GEMM."""
    ggml_type, n, k = product.shape
    if way(product.gemm_rows, product.onednn_rows, x.numel() // k) == "tiles":
        return tiles(x, product.packed, ggml_type, n, k)
    return gemm(x, product.packed, ggml_type, n, k)


def setting_rows(setting: str | int) -> int | None:
    """--dequant-gemm-rows as a number (ServerArgs has checked it): None for off."""
    return None if setting == "off" else int(setting)


def model_products(model: torch.nn.Module) -> dict[str, list]:
    """The model's GGUF products (kernels.block_linear's, held by the quantized layers as `product`, or as
    `matmul` by a Q8_0 embedding whose product is the tied lm_head), by the name their layers share."""
    found: dict[str, list] = {}
    for name, module in model.named_modules():
        product = getattr(module, "product", None) or getattr(module, "matmul", None)
        if callable(product) and hasattr(product, "gemm_rows"):
            kind = name.rpartition(".")[2]
            found.setdefault("lm_head" if kind == "embed_tokens" else kind, []).append(product)
    return found


def choose(products: dict[str, list], setting: str = "auto") -> dict[str, int | None]:
    """Set every product's `gemm_rows` and `onednn_rows` (products: name -> kernels.block_linear products;
    products of one shape share one answer) and return name -> gemm_rows for the first of each name (None:
    the GGUF kernel at every row count). A fixed setting keeps the tiles, where the CPU has them, at every
    row count from it."""
    every = [p for ps in products.values() for p in ps]
    if not every:
        return {}
    if setting == "auto":
        from minisgl.kernels.product_timing import crossovers

        by_shape = crossovers({p.shape for p in every})
    else:
        rows = setting_rows(setting)
        by_shape = {p.shape: (rows, None) for p in every}
    for p in every:
        p.gemm_rows, p.onednn_rows = by_shape[p.shape]
    return {name: ps[0].gemm_rows for name, ps in products.items()}


def describe(products: dict[str, list], chosen: dict[str, int | None]) -> str:
    """One line: each product's type and shape, and from which row count it runs which way."""
    parts = []
    for name, ps in products.items():
        ggml_type, n, k = ps[0].shape
        rows, onednn = chosen[name], ps[0].onednn_rows
        if rows is None:
            how = "GGUF kernel at every row count"
        elif amx_tiles():
            how = f"GGUF kernel below {rows} rows, AMX tiles from {rows}" + \
                (f", GEMM from {max(rows, onednn)}" if onednn is not None else "")
        else:
            how = f"GGUF kernel below {rows} rows, GEMM from {rows}"
        parts.append(f"{name} {NAMES[ggml_type]} {n}x{k}: {how}")
    return "; ".join(parts)
