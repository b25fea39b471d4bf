"""GGUF's Q8_0 blocks kept as they are: an fp16 scale and 32 int8 codes per 32 weights, 34 bytes.

torch's own int8 CPU kernel (`aten._weight_int8pack_mm`) takes one scale per output row; Q8_0 has one per
32 weights along K, and folding them into one per row would change the weights. So the product runs in
the project's C++ kernel (kernels/csrc/q8_0_linear.cpp), which keeps the file's own bytes, repacked once
at load into groups of 8 or 16 columns (kernels/csrc/packed_blocks.h): d * q is exact in float32, so its
float32 path multiplies by the exact dequantized weight; its bfloat16 path (what the engine runs) makes x
int16 per block and multiplies in integers. It reads 34 bytes per 32 weights where bfloat16 reads 64.

In SmolLM2's Q4_1 file the one Q8_0 tensor is the token embedding, which is also the output projection
(tied): `GGUFQ8Embedding` looks rows up (dequantizing only the rows asked for: bit-identical to looking
them up in the dequantized table) and computes the logits with the kernel.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from minisgl import kernels

GROUP_SIZE = 32
Q8_0 = kernels.Q8_0  # ggml type
_BLOCK_BYTES = kernels.BLOCK_BYTES[Q8_0]  # fp16 d, then 32 int8 codes


def q8_kernel_available() -> bool:
    return kernels.load()


class _Q8Weight(nn.Module):
    """The file's rows of bytes, packed for the kernel, as a uint8 buffer, which `model.to(dtype)` leaves
    alone."""

    def __init__(self, raw: np.ndarray):
        super().__init__()
        self.rows, self.cols = raw.shape[0], raw.shape[1] // _BLOCK_BYTES * GROUP_SIZE
        self.matmul = kernels.block_linear(torch.from_numpy(np.array(raw, dtype=np.uint8, order="C")), Q8_0)
        self.register_buffer("packed", self.matmul.packed, persistent=False)  # the file's rows are not kept


class GGUFQ8Linear(_Q8Weight):
    """A linear layer over Q8_0 blocks: y = x @ W.T + b, W never materialized."""

    def __init__(self, raw: np.ndarray, bias: torch.Tensor | None):
        super().__init__(raw)
        self.out_features, self.in_features = self.rows, self.cols
        self.bias = None if bias is None else nn.Parameter(bias.detach(), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.matmul(x)
        return out if self.bias is None else out + self.bias

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, gguf q8_0, group "
                f"{GROUP_SIZE}")


class GGUFQ8Embedding(_Q8Weight):
    """The token embedding over Q8_0 blocks; `matmul` is the tied output projection (the logits)."""

    def __init__(self, raw: np.ndarray, dtype: torch.dtype):
        super().__init__(raw)
        self.num_embeddings, self.embedding_dim = self.rows, self.cols
        self.dtype = dtype

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        if self.dtype in (torch.float32, torch.bfloat16):
            return kernels.q8_0_embedding(input_ids.long(), self.packed, self.cols, self.dtype)
        return kernels.q8_0_embedding(input_ids.long(), self.packed, self.cols, torch.float32).to(self.dtype)

    def extra_repr(self) -> str:
        return f"num_embeddings={self.num_embeddings}, embedding_dim={self.embedding_dim}, gguf q8_0"
