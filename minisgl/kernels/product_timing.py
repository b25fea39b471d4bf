"""How many rows a product needs before its GGUF blocks are better made whole (dequant_gemm.py), and, where
the CPU has AMX tiles, how many before oneDNN's GEMM on whole weights beats multiplying on the tiles.

Timed on this machine, once per product shape (ggml type, columns, depth) and torch thread count, and kept
in the kernels' cache folder beside their library: the first process to start has a child process measure
random blocks of each shape (a second or two for SmolLM2's five shapes, longer on a busy machine; the child
keeps what memory the timing's large products leave behind) while any other process waits on the file's
lock, and every later start reads the same answers, so every process of a server runs the same products.

For each rung of LADDER rows, the GGUF kernel and the dequantized way (the tiles, else dequantize + GEMM)
each run on the same random x (the fastest of REPEATS calls, after one to warm up). The crossover is the
first rung where the second wins at that rung and the next, by MARGIN: one win on a noisy machine does not
set it, nor does a near-tie timed alone with the weights in cache (inside the engine the CPU graph replays
the GGUF kernel in C, and a row's result there does not depend on its batch).
With tiles, ONEDNN_LADDER then finds where dequantize + GEMM overtakes them, the same way. A shape of
many columns (a tied lm_head's 49,152) is timed on its first tile only: every way costs the same per tile.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from minisgl import kernels
from minisgl.file_lock import exclusive
from minisgl.kernels import dequant_gemm
from minisgl.kernels.build import cache_dir

logger = logging.getLogger(__name__)

LADDER = (2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256)
ONEDNN_LADDER = (64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048)
REPEATS = 3
MARGIN = 1.1  # a way replaces the one below it only where it is this many times as fast
RULE = 2  # this way of choosing, in the cache file's name: a changed ladder or margin times anew
Shape = tuple[int, int, int]  # ggml type, n, k


def cache_file() -> Path:
    """The answers for this kernel build (its file name names the sources, compiler and CPU), torch and
    RULE."""
    build = Path(kernels._lib._name).stem
    return cache_dir() / f"products-{build}-torch{torch.__version__}-rule{RULE}.json"


def _key(shape: Shape) -> str:
    """The cache's key: the shape, the thread count, whether the tiles take part (MINISGL_AMX_TILES) and the
    instruction set oneDNN is limited to, if it is (ONEDNN_MAX_CPU_ISA): each changes the crossovers."""
    ggml_type, n, k = shape
    tiles = " tiles" if dequant_gemm.amx_tiles() else ""
    isa = dequant_gemm.onednn_isa()
    onednn = f" onednn={isa}" if isa else ""
    return f"{dequant_gemm.NAMES[ggml_type]} {n}x{k} threads={torch.get_num_threads()}{tiles}{onednn}"


def crossovers(shapes: set[Shape]) -> dict[Shape, tuple[int | None, int | None]]:
    """Each shape's (gemm_rows, onednn_rows), from the cache or timed now (None: never, to the last rung)."""
    path = cache_file()
    known = _read(path)
    if any(_key(s) not in known for s in shapes):
        with exclusive(path):
            known = _read(path)  # another process may have measured while this one waited
            missing = [s for s in sorted(shapes) if _key(s) not in known]
            if missing:
                started = time.perf_counter()
                logger.info("timing the GGUF kernel against its blocks made whole, once on this machine, "
                            "for %d product shape(s)", len(missing))
                for shape, answer in zip(missing, _timed_apart(missing)):
                    known[_key(shape)] = answer
                logger.info("timed in %.2f s", time.perf_counter() - started)
                _write(path, known)
    return {s: tuple(known[_key(s)]) for s in shapes}


def _timed_apart(shapes: list[Shape]) -> list[list[int | None]]:
    """Each shape's [gemm_rows, onednn_rows], timed in a child process on random blocks of that shape (a
    product's speed does not depend on its weights' values). Its largest products leave tens of MiB behind
    (oneDNN's buffers, the C allocator's free lists) that a scheduler process would otherwise hold for its
    whole life. If the child cannot run, this process times them itself, saying so."""
    request = {"shapes": shapes, "threads": torch.get_num_threads(), "ladder": LADDER,
               "onednn_ladder": ONEDNN_LADDER, "margin": MARGIN}
    here = str(Path(__file__).resolve().parents[2])  # the folder minisgl is imported from
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p)}
    try:
        done = subprocess.run([sys.executable, "-m", "minisgl.kernels.product_timing"],
                              input=json.dumps(request), capture_output=True, text=True, timeout=600, env=env)
        if done.returncode != 0:
            raise RuntimeError((done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1])
        answers = json.loads(done.stdout.strip().splitlines()[-1])
        if len(answers) != len(shapes):
            raise ValueError(f"{len(answers)} answers for {len(shapes)} shapes")
        return answers
    except (OSError, subprocess.SubprocessError, RuntimeError, ValueError, IndexError) as e:
        logger.warning("could not time the products in a child process (%s); timing them in this one", e)
        return [_timed(shape) for shape in shapes]


def _timed(shape: Shape) -> list[int | None]:
    ggml_type, n, k = shape  # only the first tile's columns are timed (crossover): only those are made
    product = random_product((ggml_type, dequant_gemm.tile_columns(n, k), k))
    return [crossover(product), onednn_from(product)]


def random_product(shape: Shape):
    """A kernels.block_linear product of `shape` on random codes (scales 0.01, offsets -0.05)."""
    ggml_type, n, k = shape
    size = kernels.BLOCK_BYTES[ggml_type]
    gen = torch.Generator().manual_seed(0)
    raw = torch.randint(0, 256, (n, k // 32 * size), dtype=torch.uint8, generator=gen)
    blocks = raw.view(n, k // 32, size)
    fields = torch.tensor([0.01, -0.05], dtype=torch.float16).view(torch.uint8)
    blocks[:, :, :2] = fields[:2]  # every block's scale d (fp16)
    if ggml_type == kernels.Q4_1:
        blocks[:, :, 2:4] = fields[2:]  # and its offset m
    return kernels.block_linear(raw, ggml_type)


def crossover(product) -> int | None:
    """The first rung of LADDER from which the dequantized way (the tiles where the CPU has them, else
    dequantize + GEMM) is faster than the GGUF kernel, here and at the next rung."""
    ggml_type, n, k = product.shape
    cols = dequant_gemm.tile_columns(n, k)  # one tile: the GGUF kernel's time is as linear in n as the GEMM's
    made_whole = dequant_gemm.tiles if dequant_gemm.amx_tiles() else dequant_gemm.gemm
    return _first_double_win(LADDER, k, lambda x: _kernel(x, product.packed, ggml_type, cols, k),
                             lambda x: made_whole(x, product.packed, ggml_type, cols, k))


def onednn_from(product) -> int | None:
    """Where the CPU has tiles: the first rung of ONEDNN_LADDER from which dequantize + GEMM beats them."""
    if not dequant_gemm.amx_tiles():
        return None
    ggml_type, n, k = product.shape
    cols = dequant_gemm.tile_columns(n, k)
    packed = product.packed
    return _first_double_win(ONEDNN_LADDER, k, lambda x: dequant_gemm.tiles(x, packed, ggml_type, cols, k),
                             lambda x: dequant_gemm.gemm(x, packed, ggml_type, cols, k))


def _first_double_win(ladder: tuple[int, ...], k: int, one, other) -> int | None:
    """The first rung where `other` is MARGIN times as fast as `one` there and at the next (at the last rung,
    there alone); None if none."""
    gen = torch.Generator().manual_seed(0)
    wins = [False] * len(ladder)
    for i, rows in enumerate(ladder):
        x = torch.randn(rows, k, generator=gen).to(torch.bfloat16)
        wins[i] = _fastest(lambda: other(x)) * MARGIN < _fastest(lambda: one(x))
        if i >= 1 and wins[i - 1] and wins[i]:
            return ladder[i - 1]
    return ladder[-1] if wins[-1] else None


def _kernel(x: torch.Tensor, packed: torch.Tensor, ggml_type: int, n: int, k: int) -> torch.Tensor:
    """The GGUF kernel on the first n columns (whole groups: a prefix of the packed buffer)."""
    out = torch.empty(x.shape[0], n, dtype=torch.bfloat16)
    name = "q8_0_linear" if ggml_type == kernels.Q8_0 else "q4_linear"
    extra = () if ggml_type == kernels.Q8_0 else (ggml_type,)
    kernels._fn(name, torch.bfloat16)(x.data_ptr(), packed.data_ptr(), out.data_ptr(), x.shape[0], n, k,
                                      *extra, torch.get_num_threads())
    return out


def _fastest(call) -> float:
    call()
    best = float("inf")
    for _ in range(REPEATS):
        started = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - started)
    return best


def _read(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _write(path: Path, known: dict) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".products-", suffix=".json", dir=path.parent)
        with os.fdopen(fd, "w") as f:
            json.dump(known, f, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except OSError as e:  # a read-only cache folder: the answer holds for this process only
        logger.warning("cannot keep the product timings in %s: %s", path, e)


def _child() -> int:
    """`python -m minisgl.kernels.product_timing`: read the request on stdin, print the answers as JSON."""
    global LADDER, ONEDNN_LADDER, MARGIN
    request = json.load(sys.stdin)
    torch.set_num_threads(request["threads"])
    LADDER, ONEDNN_LADDER = tuple(request["ladder"]), tuple(request["onednn_ladder"])
    MARGIN = request["margin"]
    print(json.dumps([_timed(tuple(shape)) for shape in request["shapes"]]))
    return 0


if __name__ == "__main__":
    sys.exit(_child())
