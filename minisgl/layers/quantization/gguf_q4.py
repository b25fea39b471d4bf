"""GGUF's Q4_0 and Q4_1 blocks multiplied by the project's C++ kernel (kernels/csrc/q4_linear.cpp).

torch's own int4 CPU kernel (gguf.py's GGUFInt4Linear) is the fall-back where the C++ kernels are off or
do not build. Its layout costs two things at batch 1: it is not tuned for one row (about 94 % of a decode
step's time went to it), and it holds each block's scale and zero in bfloat16, which rounds the
weights. The C++ kernel keeps GGUF's own layout (16 bytes of codes per 32 weights) with each block's d
and m as float32, and makes every weight exactly the float32 value gguf's dequantizing gives before it
multiplies: Q4_1 weight = q * d + m; Q4_0 weight = (q - 8) * d, which is q * d + m with m = -8 d.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from minisgl import kernels

GROUP_SIZE = 32
Q4_0, Q4_1 = 2, 3  # ggml types
_BLOCK_BYTES = {Q4_0: 18, Q4_1: 20}


@dataclass
class Q4Blocks:
    codes: np.ndarray  # uint8 [N, K / 2]: per block, weight i in the low nibble of byte i, i + 16 in the high
    scales: np.ndarray  # float32 [N, K / 32] (d)
    mins: np.ndarray  # float32 [N, K / 32] (m); weight = code * d + m, rounded once

    def dequantize(self) -> np.ndarray:
        n = self.codes.shape[0]
        by_block = self.codes.reshape(n, -1, GROUP_SIZE // 2)
        q = np.concatenate([by_block & 0x0F, by_block >> 4], axis=-1).astype(np.float32)
        return (q * self.scales[..., None] + self.mins[..., None]).reshape(n, -1)

    @staticmethod
    def cat(parts: list[Q4Blocks]) -> Q4Blocks:
        """Stacked along N (rows): how q, k, v (or gate and up) become one fused projection."""
        return Q4Blocks(*(np.concatenate([getattr(p, f) for p in parts]) for f in ("codes", "scales", "mins")))


def decode_q4(raw: np.ndarray, ggml_type: int) -> Q4Blocks:
    """GGUF Q4_0 / Q4_1 rows of bytes [N, K / 32 * block bytes] -> codes, scales and mins."""
    size = _BLOCK_BYTES[ggml_type]
    n, row_bytes = raw.shape
    blocks = np.ascontiguousarray(raw).reshape(n, row_bytes // size, size)
    d = blocks[..., 0:2].copy().view(np.float16)[..., 0].astype(np.float32)
    if ggml_type == Q4_1:
        m = blocks[..., 2:4].copy().view(np.float16)[..., 0].astype(np.float32)
    else:
        m = -8 * d  # exact: a power of two times a float16
    codes = np.ascontiguousarray(blocks[..., size - GROUP_SIZE // 2:]).reshape(n, -1)
    return Q4Blocks(codes, d, m)


class GGUFQ4Linear(nn.Module):
    """A linear layer over Q4_0 / Q4_1 blocks in the C++ kernel: y = x @ W.T + b, W never materialized."""

    def __init__(self, blocks: Q4Blocks, bias: torch.Tensor | None):
        super().__init__()
        self.out_features, self.in_features = blocks.codes.shape[0], blocks.codes.shape[1] * 2
        self.register_buffer("codes", torch.from_numpy(np.ascontiguousarray(blocks.codes)), persistent=False)
        for name in ("scales", "mins"):  # float32 kept as int32 bits, which `model.to(dtype)` leaves alone
            bits = np.ascontiguousarray(getattr(blocks, name), dtype=np.float32).view(np.int32)
            self.register_buffer(name, torch.from_numpy(bits), persistent=False)
        self.bias = None if bias is None else nn.Parameter(bias.detach(), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = kernels.q4_linear(x, self.codes, self.scales.view(torch.float32), self.mins.view(torch.float32))
        return out if self.bias is None else out + self.bias

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, gguf q4 (C++ kernel)"
