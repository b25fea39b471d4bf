"""GGUF's Q4_0 / Q4_1 blocks in the project's C++ kernel (layers/quantization/gguf_q4.py,
kernels/csrc/q4_linear.cpp), what `--quantization gguf` runs where the kernels build.

On real Q4_1 tensors of the bundled file and on made-up Q4_0 blocks, read as the file's bytes: the
kernel's float32 product with the identity is gguf's own float32 weights (equal values), so it multiplies
by exactly those weights; its float32 product equals the float64 product with them to float32 rounding,
for every row-tile size (1 to 9 rows); its bfloat16 product is no further from the exact one than the
dequantized-bfloat16 product (what --quantization none computes). A bias is added. Q4_0 rows written as
Q4_1 (how a fused layer of both types is kept) give the same products.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from minisgl import kernels
from minisgl.layers.quantization.gguf_q4 import Q4_0, Q4_1, GGUFQ4Linear, as_q4_1, fuse_q4
from minisgl.model_loader.gguf_dequant import dequantize
from minisgl.model_loader.gguf_weights import read_gguf_linear_blocks

pytestmark = pytest.mark.skipif(not kernels.load(), reason="the C++ cpu kernels did not build here")
LAYERS = ["model.layers.0.self_attn.q_proj.weight", "model.layers.29.mlp.down_proj.weight"]


@pytest.fixture(scope="module")
def blocks(bundled_source, model_config):
    found = read_gguf_linear_blocks(bundled_source.path, model_config)
    return {name: found[name] for name in LAYERS}


def _made_up_q4_0() -> np.ndarray:
    rng = np.random.default_rng(0)
    raw = rng.integers(0, 256, size=(40, 4 * 18), dtype=np.uint8)  # 40 rows of 4 blocks: every code
    blocks = raw.reshape(-1, 18)
    blocks[:, 0:2] = rng.normal(0, 0.02, size=len(blocks)).astype(np.float16).view(np.uint8).reshape(-1, 2)
    return raw


def _cases(blocks):
    return [(name, *blocks[name]) for name in LAYERS] + [("made-up Q4_0", Q4_0, _made_up_q4_0())]


def test_the_kernel_multiplies_by_ggufs_own_float32_weights(blocks):
    for name, ggml_type, raw in _cases(blocks):
        want = dequantize(raw, ggml_type).reshape(raw.shape[0], -1)
        eye = torch.eye(want.shape[1])  # row i of the product is column i of W^T: one product, exact
        got = GGUFQ4Linear(raw, ggml_type, None)(eye).t().numpy()
        # equal values (Q4_0's code 8 with a negative d is -0.0 in gguf's (q - 8) * d, +0.0 in q * d + m)
        assert np.array_equal(got, want) and not np.isnan(got).any(), name
    assert blocks[LAYERS[0]][0] == Q4_1


def test_q4_0_rows_written_as_q4_1_give_the_same_products():
    raw = _made_up_q4_0()
    x = torch.randn(3, raw.shape[1] // 18 * 32, generator=torch.Generator().manual_seed(7))
    for dtype in (torch.float32, torch.bfloat16):
        want = GGUFQ4Linear(raw, Q4_0, None)(x.to(dtype))
        assert torch.equal(GGUFQ4Linear(as_q4_1(raw), Q4_1, None)(x.to(dtype)), want)
        fused_type, fused = fuse_q4([(Q4_0, raw), (Q4_1, as_q4_1(raw))])
        assert fused_type == Q4_1 and torch.equal(GGUFQ4Linear(fused, Q4_1, None)(x.to(dtype)), want.repeat(1, 2))


@pytest.mark.parametrize("rows", [1, 3, 8, 9])
def test_the_float32_product_uses_exactly_those_weights(blocks, rows):
    gen = torch.Generator().manual_seed(rows)
    for name, ggml_type, raw in _cases(blocks):
        w = torch.from_numpy(dequantize(raw, ggml_type).reshape(raw.shape[0], -1)).double()
        bias = torch.randn(w.shape[0], generator=gen)
        layer = GGUFQ4Linear(raw, ggml_type, bias)
        x = torch.randn(rows, w.shape[1], generator=gen)
        exact = x.double() @ w.t() + bias.double()
        got = layer(x)
        assert got.dtype == torch.float32 and got.shape == exact.shape
        torch.testing.assert_close(got.double(), exact, rtol=1e-5, atol=1e-5 * exact.abs().max().item(), msg=name)


def test_the_bfloat16_product_is_no_further_off_than_the_dequantized_bfloat16_one(blocks):
    for name, ggml_type, raw in _cases(blocks):
        w = torch.from_numpy(dequantize(raw, ggml_type).reshape(raw.shape[0], -1))
        x = torch.randn(5, w.shape[1], generator=torch.Generator().manual_seed(1)).to(torch.bfloat16)
        exact = x.double() @ w.double().t()
        got = GGUFQ4Linear(raw, ggml_type, None)(x)
        deq = (x @ w.to(torch.bfloat16).t()).double()
        assert got.dtype == torch.bfloat16
        assert (got.double() - exact).abs().max() <= (deq - exact).abs().max(), name
