"""GGUF blocks to float32 weights with torch: the same numbers as the gguf package's numpy code, faster.

The bundled file is Q4_1 (and one Q8_0 tensor), and every process that loads the model dequantizes all of
it: with gguf's numpy code that took about 2.2 s of each start, with torch's vectorized integer and float
ops about a tenth of that. The arithmetic is the reference's step for step (fp16 scale made float32, then
one float32 multiply and, for Q4_1, one float32 add, each rounded), so the weights are bit for bit the
ones transformers loads from the same file; tests/model_loader/test_gguf_dequant.py checks every tensor.
Other block types go to gguf's own code.

    Q4_0  block of 32: d (fp16), 16 bytes of 4-bit codes q   ->  d * (q - 8)
    Q4_1  block of 32: d (fp16), m (fp16), 16 bytes of codes  ->  d * q + m
    Q8_0  block of 32: d (fp16), 32 int8 codes q              ->  q * d

A block's 16 code bytes hold elements 0-15 in their low nibbles and 16-31 in their high nibbles.
"""

from __future__ import annotations

import numpy as np
import torch

Q4_0, Q4_1, Q8_0 = 2, 3, 8  # ggml type numbers (gguf.constants.GGMLQuantizationType)
BLOCK_BYTES = {Q4_0: 18, Q4_1: 20, Q8_0: 34}


def dequantize(data: np.ndarray, ggml_type: int) -> np.ndarray:
    """A tensor's stored data (uint8 rows for block types) as float32, in the layout gguf's dequantize
    gives."""
    if ggml_type not in BLOCK_BYTES:
        from gguf.constants import GGMLQuantizationType
        from gguf.quants import dequantize as reference

        return reference(data, GGMLQuantizationType(ggml_type))
    size = BLOCK_BYTES[ggml_type]
    rows = data.shape[:-1]
    # a copy: the file is mapped read-only
    blocks = torch.from_numpy(np.array(data, dtype=np.uint8)).reshape(-1, size)
    d = _fp16(blocks, 0)
    if ggml_type == Q8_0:
        out = blocks[:, 2:].contiguous().view(torch.int8).to(torch.float32) * d
    else:
        codes = blocks[:, size - 16:]
        q = torch.cat([codes & 0x0F, codes >> 4], dim=1)
        if ggml_type == Q4_0:
            out = d * (q.to(torch.int8) - 8).to(torch.float32)
        else:
            out = d * q.to(torch.float32) + _fp16(blocks, 2)
    return out.reshape(*rows, -1).numpy()


def _fp16(blocks: torch.Tensor, at: int) -> torch.Tensor:
    """The fp16 stored at bytes [at, at + 2) of every block, as a float32 column."""
    return blocks[:, at:at + 2].contiguous().view(torch.float16).to(torch.float32)
