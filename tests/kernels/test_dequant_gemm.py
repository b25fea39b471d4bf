"""GGUF products from a row count on: the blocks dequantized into a scratch buffer and multiplied by oneDNN's
GEMM (kernels/dequant_gemm.py, csrc/dequant.cpp), chosen per product and row count (product_timing.py).

What it promises:
- the dequantized weights are `--quantization none`'s, bit for bit: gguf's float32 value rounded to bfloat16;
- the product equals F.linear with those weights bit for bit, in one tile or in several;
- a layer's product switches at its `gemm_rows`, and bfloat16 only;
- `auto` times the ways once per shape (in a child process, or here if that cannot start) and keeps the
  answers; off and N set every product;
- a CPU graph records the GEMM as a torch step and its replay computes on new inputs;
- where the CPU has AMX, the tiles multiply with the same weights (an identity x gives them back bit for
  bit), equal F.linear to bfloat16 rounding, give a row the same bits alone and in any batch, and run below
  a product's `onednn_rows`.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from minisgl import kernels
from minisgl.kernels import dequant_gemm, product_timing
from minisgl.kernels import graph as kernel_graph

pytestmark = pytest.mark.skipif(not kernels.load(), reason="the C++ cpu kernels did not build here")
KINDS = {"q4_0": kernels.Q4_0, "q4_1": kernels.Q4_1, "q8_0": kernels.Q8_0}


def _blocks(kind: str, n: int, k: int, seed: int):
    """(kernels.block_linear product, float32 weight as gguf dequantizes it) of random weights."""
    from gguf.constants import GGMLQuantizationType
    from gguf.quants import dequantize, quantize

    qtype = GGMLQuantizationType[kind.upper()]
    w = np.random.default_rng(seed).standard_normal((n, k)).astype(np.float32) * 0.05
    w[:, 3] *= 30  # a block with a large scale beside small ones
    raw = quantize(w, qtype)
    ref = torch.from_numpy(np.asarray(dequantize(raw, qtype), dtype=np.float32).reshape(n, k))
    return kernels.block_linear(torch.from_numpy(np.ascontiguousarray(raw)), KINDS[kind]), ref


def _x(rows: int, k: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(rows, k, generator=torch.Generator().manual_seed(seed)).to(torch.bfloat16)


@pytest.mark.parametrize("kind", KINDS)
def test_the_weights_are_quantization_nones_bit_for_bit(kind):
    """n = 37: the last packed group is short; a slice from a group's start is that slice of the weight."""
    product, ref = _blocks(kind, 37, 160, seed=1)
    want = ref.to(torch.bfloat16)  # what the loader gives --quantization none
    got = dequant_gemm.weight(product.packed, KINDS[kind], 37, 160)
    assert torch.equal(got.view(torch.int16), want.view(torch.int16))
    group = kernels._group
    part = torch.empty(37 - group, 160, dtype=torch.bfloat16)
    dequant_gemm.dequantize(product.packed, KINDS[kind], 160, group, 37, part)
    assert torch.equal(part, want[group:])


@pytest.mark.parametrize("kind", KINDS)
def test_the_product_is_f_linear_with_those_weights_in_one_tile_or_several(kind, monkeypatch):
    product, ref = _blocks(kind, 100, 256, seed=2)
    w, x = ref.to(torch.bfloat16), _x(40, 256)
    ggml_type, n, k = product.shape
    assert torch.equal(dequant_gemm.gemm(x, product.packed, ggml_type, n, k), F.linear(x, w))
    monkeypatch.setattr(dequant_gemm, "TILE_BYTES", 2 * 256 * 2 * kernels._group)  # two groups a tile
    assert dequant_gemm.tile_columns(n, k) == 2 * kernels._group < n
    assert torch.equal(dequant_gemm.gemm(x.view(4, 10, 256), product.packed, ggml_type, n, k),
                       F.linear(x, w).view(4, 10, n))


def _made_whole(x: torch.Tensor, product) -> torch.Tensor:
    """What a product's dequantized way gives x: the tiles where the CPU has them (its onednn_rows None)."""
    ggml_type, n, k = product.shape
    way = dequant_gemm.tiles if dequant_gemm.amx_tiles() else dequant_gemm.gemm
    return way(x.contiguous(), product.packed, ggml_type, n, k)


@pytest.mark.parametrize("onednn_rows", [None, 1])
def test_a_layer_switches_at_its_row_count_and_for_bfloat16_only(onednn_rows):
    product, ref = _blocks("q4_1", 64, 128, seed=3)
    kernel_only = {rows: product(_x(rows, 128, rows)) for rows in (3, 4, 9)}  # gemm_rows is None: the kernel
    product.gemm_rows, product.onednn_rows = 4, onednn_rows
    w = ref.to(torch.bfloat16)
    assert torch.equal(product(_x(3, 128, 3)), kernel_only[3])
    for rows in (4, 9):
        x = _x(rows, 128, rows)
        got = product(x)
        want = F.linear(x, w) if onednn_rows == 1 else _made_whole(x, product)  # oneDNN from 1 row: its GEMM
        assert torch.equal(got, want) and not torch.equal(got, kernel_only[rows])
    x32 = _x(9, 128).float()
    float_path = product(x32)
    product.gemm_rows = None
    assert torch.equal(float_path, product(x32))  # float32 x keeps the kernel's exact float32 path


def test_off_and_a_number_set_every_product():
    a, _ = _blocks("q4_0", 32, 64, seed=4)
    b, _ = _blocks("q8_0", 48, 64, seed=5)
    products = {"qkv_proj": [a], "lm_head": [b]}
    assert dequant_gemm.choose(products, "12") == {"qkv_proj": 12, "lm_head": 12}
    assert a.gemm_rows == b.gemm_rows == 12 and a.onednn_rows is None  # the tiles (if any) at every row count
    assert dequant_gemm.choose(products, "off") == {"qkv_proj": None, "lm_head": None}
    assert a.gemm_rows is None and b.gemm_rows is None
    a.onednn_rows = 256
    line = dequant_gemm.describe(products, {"qkv_proj": 16, "lm_head": None})
    how = "AMX tiles from 16, GEMM from 256" if dequant_gemm.amx_tiles() else "GEMM from 16"
    assert line == (f"qkv_proj q4_0 32x64: GGUF kernel below 16 rows, {how}; "
                    "lm_head q8_0 48x64: GGUF kernel at every row count")


def test_auto_times_each_shape_once_and_every_later_choice_reads_it(tmp_path, monkeypatch):
    monkeypatch.setenv("MINISGL_KERNEL_CACHE", str(tmp_path))
    monkeypatch.setattr(product_timing, "LADDER", (2, 64, 256))  # three rungs: a short test
    monkeypatch.setattr(product_timing, "ONEDNN_LADDER", (64, 256))
    a, _ = _blocks("q4_1", 512, 256, seed=6)
    twin, _ = _blocks("q4_1", 512, 256, seed=7)  # same shape: one timing for both
    products = {"gate_up_proj": [a, twin]}
    chosen = dequant_gemm.choose(products, "auto")
    saved = json.loads(product_timing.cache_file().read_text())
    assert list(saved.values()) == [[chosen["gate_up_proj"], a.onednn_rows]]
    assert chosen["gate_up_proj"] in (None, 2, 64, 256) and a.onednn_rows in (None, 64, 256)
    if not dequant_gemm.amx_tiles():
        assert a.onednn_rows is None  # no tiles: nothing to time against the GEMM
    assert a.gemm_rows == twin.gemm_rows == chosen["gate_up_proj"] and twin.onednn_rows == a.onednn_rows
    key = next(iter(saved))
    assert key == f"q4_1 512x256 threads={torch.get_num_threads()}{_key_tail()}"
    product_timing.cache_file().write_text(json.dumps({key: [7, 300]}))  # what an earlier start measured
    assert dequant_gemm.choose(products, "auto") == {"gate_up_proj": 7} and twin.onednn_rows == 300


def test_a_timing_child_that_cannot_start_leaves_the_timing_to_this_process(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("MINISGL_KERNEL_CACHE", str(tmp_path))
    monkeypatch.setattr(product_timing, "LADDER", (2, 64))
    monkeypatch.setattr(product_timing, "ONEDNN_LADDER", (64, 128))
    monkeypatch.setattr(product_timing.sys, "executable", str(tmp_path / "no-such-python"))
    a, _ = _blocks("q8_0", 64, 128, seed=14)
    with caplog.at_level("WARNING", logger=product_timing.__name__):
        chosen = dequant_gemm.choose({"lm_head": [a]}, "auto")
    assert "could not time the products in a child process" in caplog.text
    assert chosen["lm_head"] in (None, 2, 64) and a.onednn_rows in (None, 64, 128)
    assert json.loads(product_timing.cache_file().read_text()) == {
        f"q8_0 64x128 threads={torch.get_num_threads()}{_key_tail()}": [chosen["lm_head"], a.onednn_rows]}


@pytest.mark.parametrize("onednn_rows", [None, 1])
def test_a_cpu_graph_records_the_product_as_a_step_and_replays_it_on_new_inputs(onednn_rows):
    product, ref = _blocks("q4_1", 96, 128, seed=8)
    product.gemm_rows, product.onednn_rows = 2, onednn_rows
    x = _x(5, 128, seed=9)
    with kernel_graph.record() as recorder:
        h = kernels.rms_norm(x, torch.ones(128, dtype=torch.bfloat16), 1e-6)
        out = product(h)
    graph = recorder.graph()
    assert len(graph) == 1 and len(graph.steps) == 1 and graph.steps[0][0] == 1  # after the norm
    x.copy_(_x(5, 128, seed=10))
    graph.replay()
    h = kernels.rms_norm(x, torch.ones(128, dtype=torch.bfloat16), 1e-6)
    want = F.linear(h, ref.to(torch.bfloat16)) if onednn_rows == 1 else _made_whole(h, product)
    assert torch.equal(out, want)


def test_minisgl_amx_tiles_0_puts_the_products_on_dequantize_and_gemm(monkeypatch):
    product, ref = _blocks("q4_1", 64, 128, seed=15)
    product.gemm_rows = 2
    try:
        with monkeypatch.context() as env:  # the setting as it was before the cache is cleared again
            env.setenv(dequant_gemm.AMX_ENV, "0")
            dequant_gemm.amx_tiles.cache_clear()
            assert not dequant_gemm.amx_tiles() and dequant_gemm.way(2, None, 5) == "gemm"
            x = _x(5, 128, seed=16)
            assert torch.equal(product(x), F.linear(x, ref.to(torch.bfloat16)))  # the GEMM's bits
    finally:
        dequant_gemm.amx_tiles.cache_clear()


def _key_tail() -> str:
    """The end of a timing's cache key: the GGUF kernel's rival (the tiles, else the GEMM) is timed apart, and
    so is a oneDNN limited by ONEDNN_MAX_CPU_ISA (the suite may run under one)."""
    isa = dequant_gemm.onednn_isa()
    return (" tiles" if dequant_gemm.amx_tiles() else "") + (f" onednn={isa}" if isa else "")


@pytest.mark.parametrize(("isa", "tiles_allowed"), [("avx512_core_bf16", False), ("AVX10_1_512_AMX", True),
                                                    ("ALL", True)])
def test_onednn_max_cpu_isa_below_amx_keeps_the_tiles_off_and_keys_the_timings_apart(monkeypatch, isa,
                                                                                      tiles_allowed):
    """ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16 runs a process as on a CPU without AMX (an AMD EPYC's instruction
    set): oneDNN's GEMM leaves its tiles, and so do ours; the crossovers timed so are kept apart."""
    try:
        with monkeypatch.context() as env:
            env.delenv(dequant_gemm.ONEDNN_ISA_ENV, raising=False)  # whether this CPU has tiles, unlimited
            dequant_gemm.amx_tiles.cache_clear()
            has_tiles = dequant_gemm.amx_tiles()
            env.setenv(dequant_gemm.ONEDNN_ISA_ENV, isa)
            dequant_gemm.amx_tiles.cache_clear()
            assert dequant_gemm.amx_tiles() == (has_tiles and tiles_allowed)
            tiles = " tiles" if dequant_gemm.amx_tiles() else ""
            onednn = "" if isa == "ALL" else f" onednn={isa.upper()}"
            assert product_timing._key((kernels.Q4_1, 960, 576)) == \
                f"q4_1 960x576 threads={torch.get_num_threads()}{tiles}{onednn}"
    finally:
        dequant_gemm.amx_tiles.cache_clear()


amx = pytest.mark.skipif(not dequant_gemm.amx_tiles(), reason="no AMX tiles on this CPU (or in its build)")


@amx
@pytest.mark.parametrize("kind", KINDS)
def test_the_tiles_multiply_with_quantization_nones_weights(kind):
    """An identity x (k rows) gives each weight back once, summed with zeros: W.T, bit for bit but for the
    sign of a zero (Q4_0's zero weights keep d's sign, which no sum keeps). n = 37: the last group of 16
    columns is short."""
    product, ref = _blocks(kind, 37, 160, seed=11)
    eye = torch.eye(160, dtype=torch.bfloat16)
    got = dequant_gemm.tiles(eye, product.packed, KINDS[kind], 37, 160)
    want = ref.to(torch.bfloat16).t()
    assert torch.equal(got, want) and (want != 0).sum() > want.numel() // 2


@amx
@pytest.mark.parametrize("kind", KINDS)
def test_the_tiles_equal_f_linear_to_rounding_and_a_row_alone_or_batched(kind):
    """1024 columns by 256, 70 rows: 5 tiles of 16 rows (the last one short), split between two threads; each
    row alone gives the bits it gives in the batch."""
    product, ref = _blocks(kind, 1024, 256, seed=12)
    x = _x(70, 256, seed=13)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        got = dequant_gemm.tiles(x, product.packed, KINDS[kind], 1024, 256)
    finally:
        torch.set_num_threads(threads)
    want = F.linear(x, ref.to(torch.bfloat16))
    torch.testing.assert_close(got.float(), want.float(), rtol=2 ** -7, atol=1e-3 * want.abs().max().item())
    assert (got == want).float().mean() > 0.99  # the same sums but for their order
    for r in (0, 15, 16, 69):
        alone = dequant_gemm.tiles(x[r : r + 1].contiguous(), product.packed, KINDS[kind], 1024, 256)
        assert torch.equal(alone[0], got[r])


@pytest.mark.parametrize("bad", ["0", "-3", "many", "1.5"])
def test_a_bad_setting_is_refused_naming_the_flag(bad):
    from minisgl.server_args import ServerArgs

    with pytest.raises(ValueError, match=f"--dequant-gemm-rows must be auto, off or a number of rows >= 1, "
                                         f"not '{bad}'"):
        ServerArgs(dequant_gemm_rows=bad).validate()
