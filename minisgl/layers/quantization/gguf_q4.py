"""GGUF's Q4_0 and Q4_1 blocks multiplied by the project's C++ kernel (kernels/csrc/q4_linear.cpp).

torch's own int4 CPU kernel (gguf.py's GGUFInt4Linear) is the fall-back where the C++ kernels are off or
do not build. Its layout costs two things at batch 1: it is not tuned for one row (about 94 % of a decode
step's time went to it), and it holds each block's scale and zero in bfloat16, which rounds the
weights. The C++ kernel keeps the file's own bytes, 18 (Q4_0) or 20 (Q4_1) per 32 weights, repacked once
at load into groups of 8 or 16 columns (kernels/csrc/packed_blocks.h): each block's fp16 scale d (and Q4_1's
fp16 offset m) are exact in float32, so the float32 path multiplies by exactly the weights gguf's
dequantizing gives: Q4_1 weight = q * d + m; Q4_0 weight = (q - 8) * d, which is q * d + m with m = -8 d.
The bfloat16 path (what the engine runs) makes x int16 per block and multiplies in integers
(kernels/csrc/packed_linear.h).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from minisgl import kernels

Q4_0, Q4_1 = kernels.Q4_0, kernels.Q4_1  # ggml types


def as_q4_1(raw: np.ndarray) -> np.ndarray | None:
    """Q4_0 rows of bytes as Q4_1's (the offset m = -8 d stored after d), or None where -8 d overflows
    fp16."""
    n, row_bytes = raw.shape
    blocks = np.ascontiguousarray(raw).reshape(n, row_bytes // 18, 18)
    m = (blocks[..., 0:2].copy().view(np.float16) * np.float16(-8))  # exact, short of overflow
    if not np.isfinite(m).all():
        return None
    return np.concatenate([blocks[..., 0:2], m.view(np.uint8), blocks[..., 2:]], axis=-1).reshape(n, -1)


def fuse_q4(parts: list[tuple[int, np.ndarray]]) -> tuple[int, np.ndarray] | None:
    """Checkpoint parts (ggml type, rows of bytes), stacked along N as one fused projection (q, k, v or gate,
    up); parts of both types become Q4_1. None where a Q4_0 part cannot be written as Q4_1."""
    types = {t for t, _ in parts}
    if types == {Q4_0} or types == {Q4_1}:
        return types.pop(), np.concatenate([np.ascontiguousarray(r) for _, r in parts])
    rows = [r if t == Q4_1 else as_q4_1(r) for t, r in parts]
    return None if any(r is None for r in rows) else (Q4_1, np.concatenate(rows))


class GGUFQ4Linear(nn.Module):
    """A linear layer over Q4_0 / Q4_1 blocks in the C++ kernel: y = x @ W.T + b, W never materialized."""

    def __init__(self, raw: np.ndarray, ggml_type: int, bias: torch.Tensor | None):
        super().__init__()
        assert ggml_type in (Q4_0, Q4_1)
        self.ggml_type = ggml_type
        self.out_features = raw.shape[0]
        self.in_features = raw.shape[1] // kernels.BLOCK_BYTES[ggml_type] * 32
        self.bias = None if bias is None else nn.Parameter(bias.detach(), requires_grad=False)
        self.product = kernels.block_linear(torch.from_numpy(np.array(raw, dtype=np.uint8, order="C")),
                                            ggml_type)
        self.register_buffer("packed", self.product.packed, persistent=False)  # the file's rows are not kept

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.product(x)
        return out if self.bias is None else out + self.bias

    def extra_repr(self) -> str:
        kind = "q4_1" if self.ggml_type == Q4_1 else "q4_0"
        return f"in_features={self.in_features}, out_features={self.out_features}, gguf {kind} (C++ kernel)"
