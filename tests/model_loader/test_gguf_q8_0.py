"""GGUF's Q8_0 blocks kept as stored (layers/quantization/gguf_q8_0.py, kernels/csrc/q8_0_linear.cpp).

On the bundled file's one Q8_0 tensor, the token embedding (49152 x 576, which the tied lm_head multiplies
by too): the kernel multiplies by gguf's own dequantized values exactly, a lookup equals the dequantized
bfloat16 table bit for bit, and the kernel's product equals the dequantized-weight bfloat16 product
within bfloat16 rounding (it multiplies by the exact weight; the bfloat16 path rounds each weight
first). A Q8_0 linear layer with a bias, on gguf's own Q8_0 quantization of random weights, too.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from minisgl import kernels
from minisgl.layers.quantization.gguf_q8_0 import Q8_0, GGUFQ8Embedding, GGUFQ8Linear
from minisgl.model_loader.gguf_weights import read_gguf_linear_blocks

pytestmark = pytest.mark.skipif(not kernels.load(), reason="the C++ cpu kernels did not build here")


@pytest.fixture(scope="module")
def embedding_raw(bundled_source, model_config):
    ggml_type, raw = read_gguf_linear_blocks(bundled_source.path, model_config)["model.embed_tokens.weight"]
    assert ggml_type == Q8_0
    return raw


@pytest.fixture(scope="module")
def embedding_w(embedding_raw):
    return _gguf_dequantize(embedding_raw)


def _gguf_dequantize(raw: np.ndarray) -> np.ndarray:
    from gguf.constants import GGMLQuantizationType
    from gguf.quants import dequantize

    return np.asarray(dequantize(raw, GGMLQuantizationType.Q8_0), dtype=np.float32).reshape(raw.shape[0], -1)


def _check_product(got: torch.Tensor, x: torch.Tensor, w: torch.Tensor) -> None:
    """`got` against the exact product: no further off than the dequantized-bf16 product, and close to it."""
    exact = x.double() @ w.double().t()
    deq = (x @ w.to(torch.bfloat16).t()).double()  # what --quantization none computes
    assert got.dtype == torch.bfloat16 and got.shape == exact.shape
    got = got.double()
    assert (got - exact).abs().max() <= (deq - exact).abs().max()
    torch.testing.assert_close(got, deq, rtol=2**-7, atol=2**-8 * exact.abs().max().item())


def test_embedding_multiplies_by_ggufs_own_values_and_looks_up_bit_identically(embedding_raw, embedding_w):
    w = embedding_w
    table = GGUFQ8Embedding(embedding_raw, torch.bfloat16)
    eye = torch.eye(w.shape[1])  # the float32 product with the identity: W^T, one exact product per value
    assert np.array_equal(table.matmul(eye).t().numpy(), w)
    ids = torch.tensor([[0, 1, 2], [17, 4096, 49151]])
    assert torch.equal(table(ids), torch.from_numpy(w)[ids].to(torch.bfloat16))


@pytest.mark.parametrize("batch", [1, 19])  # the kernel takes rows 8 at a time: 19 is two tiles and 3 left
def test_tied_lm_head_product_equals_dequantized_bf16_within_bf16_rounding(embedding_raw, embedding_w, batch):
    w = torch.from_numpy(embedding_w)
    x = torch.randn(batch, w.shape[1], generator=torch.Generator().manual_seed(batch)).to(torch.bfloat16)
    _check_product(GGUFQ8Embedding(embedding_raw, torch.bfloat16).matmul(x), x, w)


def test_q8_0_linear_with_bias_on_ggufs_own_quantization():
    from gguf.constants import GGMLQuantizationType
    from gguf.quants import quantize

    g = torch.Generator().manual_seed(0)
    w = (torch.randn(96, 256, generator=g) * 0.05).numpy()
    raw = quantize(w, GGMLQuantizationType.Q8_0)
    bias = torch.randn(96, generator=g).to(torch.bfloat16)
    x = torch.randn(2, 3, 256, generator=g).to(torch.bfloat16)
    got = GGUFQ8Linear(raw, None)(x)
    assert got.shape == (2, 3, 96)
    _check_product(got.reshape(6, 96), x.reshape(6, 256), torch.from_numpy(_gguf_dequantize(raw)))
    assert torch.equal(GGUFQ8Linear(raw, bias)(x), got + bias)
