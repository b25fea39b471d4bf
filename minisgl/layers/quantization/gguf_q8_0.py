"""GGUF's Q8_0 blocks kept as they are: int8 codes with one fp16 scale per 32 weights.

torch's own int8 CPU kernel (`aten._weight_int8pack_mm`) takes one scale per output row; Q8_0 has one per
32 weights along K, and folding them into one per row would change the weights. So the product runs in
the project's C++ kernel (kernels/csrc/q8_0_linear.cpp): d * q is exact in float32, and the kernel adds
x * (d * q) in float32, i.e. it multiplies by the exact dequantized weight (the bfloat16 path rounds each
weight to 8 bits of mantissa first). It reads 1 + 1/16 bytes per weight where bfloat16 reads 2.

In SmolLM2's Q4_1 file the one Q8_0 tensor is the token embedding, which is also the output projection
(tied): `GGUFQ8Embedding` looks rows up (dequantizing only the rows asked for: bit-identical to looking
them up in the dequantized table) and computes the logits with the kernel.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from minisgl import kernels

GROUP_SIZE = 32
Q8_0 = 8  # ggml type
_BLOCK_BYTES = 34  # fp16 d, then 32 int8 codes


@dataclass
class Q8Blocks:
    codes: np.ndarray  # int8 [N, K]
    scales: np.ndarray  # float16 [N, K / 32]; value = code * scale

    def dequantize(self) -> np.ndarray:
        return self.codes.astype(np.float32) * np.repeat(self.scales.astype(np.float32), GROUP_SIZE, axis=1)

    @staticmethod
    def cat(parts: list[Q8Blocks]) -> Q8Blocks:
        return Q8Blocks(*(np.concatenate([getattr(p, f) for p in parts]) for f in ("codes", "scales")))


def decode_q8_0(raw: np.ndarray) -> Q8Blocks:
    """GGUF Q8_0 rows of bytes [N, K / 32 * 34] -> codes and scales."""
    n, row_bytes = raw.shape
    blocks = np.ascontiguousarray(raw).reshape(n, row_bytes // _BLOCK_BYTES, _BLOCK_BYTES)
    scales = blocks[..., 0:2].copy().view(np.float16)[..., 0]
    codes = blocks[..., 2:].copy().view(np.int8).reshape(n, -1)
    return Q8Blocks(codes, scales)


def q8_kernel_available() -> bool:
    return kernels.load()


class _Q8Weight(nn.Module):
    """codes and scales as buffers: int8 and int16 (float16's bits), which `model.to(dtype)` leaves alone."""

    def __init__(self, blocks: Q8Blocks):
        super().__init__()
        self.register_buffer("codes", torch.from_numpy(np.ascontiguousarray(blocks.codes)), persistent=False)
        scales = np.ascontiguousarray(blocks.scales).view(np.int16)
        self.register_buffer("scales", torch.from_numpy(scales), persistent=False)

    def matmul(self, x: torch.Tensor) -> torch.Tensor:
        return kernels.q8_0_linear(x, self.codes, self.scales)


class GGUFQ8Linear(_Q8Weight):
    """A linear layer over Q8_0 blocks: y = x @ W.T + b, W never materialized."""

    def __init__(self, blocks: Q8Blocks, bias: torch.Tensor | None):
        super().__init__(blocks)
        self.out_features, self.in_features = blocks.codes.shape
        self.bias = None if bias is None else nn.Parameter(bias.detach(), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.matmul(x)
        return out if self.bias is None else out + self.bias

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, gguf q8_0, group {GROUP_SIZE}"


class GGUFQ8Embedding(_Q8Weight):
    """The token embedding over Q8_0 blocks; `matmul` is the tied output projection (the logits)."""

    def __init__(self, blocks: Q8Blocks, dtype: torch.dtype):
        super().__init__(blocks)
        self.num_embeddings, self.embedding_dim = blocks.codes.shape
        self.dtype = dtype

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        codes = self.codes[input_ids].view(*input_ids.shape, -1, GROUP_SIZE).float()
        scales = self.scales[input_ids].view(torch.float16).float().unsqueeze(-1)
        return (codes * scales).flatten(-2).to(self.dtype)

    def extra_repr(self) -> str:
        return f"num_embeddings={self.num_embeddings}, embedding_dim={self.embedding_dim}, gguf q8_0"
