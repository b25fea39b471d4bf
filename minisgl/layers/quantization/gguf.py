"""`--quantization gguf`: GGUF's 4-bit blocks multiplied as they are.

Batch-1 decode streams every weight once per token, so it is bound by memory bandwidth: bf16 weights are
about 270 MB for SmolLM2-135M, its 4-bit blocks about 85 MB. Here the linear layers keep the blocks.

Where the project's C++ kernels build, Q4_0 and Q4_1 run in its own kernel (gguf_q4.py), with each
block's scale in float32. This file's GGUFInt4Linear is the fall-back without them (--cpu-kernels off, or
no compiler); its kernel is torch's own `aten._weight_int4pack_mm_for_cpu(x, packed, group_size,
scales_and_zeros)`. Its weight is 4-bit codes q in 0..15, packed by `aten._convert_weight_to_int4pack_for_cpu`
from an int32 [N, K] matrix, and `scales_and_zeros` of shape [K / group_size, N, 2], in the activations'
dtype; the value of one weight is (q - 8) * scale + zero (checked on a small matrix in the tests). GGUF's
blocks are 32 weights along K with their own fp16 numbers, so with group_size 32 they map one to one:

- Q4_1 (d, m, 32 codes): value = d * q + m   ->  scale = d, zero = m + 8 * d
- Q4_0 (d, 32 codes):    value = d * (q - 8) ->  scale = d, zero = 0

The one loss: scale and zero are stored in bfloat16 (8-bit mantissa) where GGUF has fp16 (11 bits), the
same relative rounding that dequantizing to bfloat16 applies to each weight.

Q8_0 (d, 32 int8 codes) runs in the project's C++ kernel (gguf_q8_0.py: torch's int8 kernel takes one
scale per output row, Q8_0 has one per 32 weights): the linear layers and the token embedding, which a
tied model's logits also multiply by. Without the C++ kernels (--cpu-kernels off, or no compiler) Q8_0 is
dequantized. Other types (K-quants, ...) are dequantized too; the log says which, in one line.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

logger = logging.getLogger(__name__)

GROUP_SIZE = 32  # weights per GGUF block, along K
Q4_0, Q4_1, Q8_0 = 2, 3, 8  # ggml types (gguf.GGMLQuantizationType values)
_BLOCK_BYTES = {Q4_0: 18, Q4_1: 20}
INT4_TYPES = tuple(_BLOCK_BYTES)
_DEQUANT_REASON = {
    Q8_0: "Q8_0 runs in the C++ cpu kernels, which are off or did not build",
}


class UnsupportedQuantization(ValueError):
    """A --quantization that this model, dtype or device cannot run, in one line."""


def int4_kernel_available() -> bool:
    aten = torch.ops.aten
    return (hasattr(aten, "_weight_int4pack_mm_for_cpu")
            and hasattr(aten, "_convert_weight_to_int4pack_for_cpu"))


def check_supported(quantization: str | None, model_kind: str, device: torch.device,
                    dtype: torch.dtype) -> bool:
    """Whether to keep the GGUF file's quantized blocks; raises UnsupportedQuantization where `--quantization
    gguf` can't.

    None (no flag) keeps them for a .gguf model in bfloat16 on the CPU, and dequantizes otherwise (float32
    is always the exact, dequantized reference path); ModelRunner also dequantizes where the C++ kernels
    are off, since torch's int4 kernel rounds each block's scale to bfloat16 and its greedy tokens then part
    from transformers' bfloat16 ones at more than near-ties (tests/scheduler/test_bf16_default_path.py).
    "none" always dequantizes."""
    if quantization is None:
        return model_kind == "gguf" and dtype == torch.bfloat16 and device.type == "cpu"
    if quantization == "none":
        return False
    if quantization != "gguf":
        raise UnsupportedQuantization(f"--quantization must be none or gguf, not {quantization!r}")
    if model_kind != "gguf":
        raise UnsupportedQuantization("--quantization gguf needs a .gguf model (this one is a Hugging Face "
                                      "folder)")
    if dtype == torch.float32:
        raise UnsupportedQuantization("--quantization gguf runs bfloat16 activations; --dtype float32 is the "
                                      "exact, dequantized reference path: drop one of the two flags")
    if dtype != torch.bfloat16 or device.type != "cpu":
        raise UnsupportedQuantization("--quantization gguf needs --device cpu and --dtype bfloat16 (or "
                                      f"auto), not {device.type} {str(dtype).removeprefix('torch.')}")
    if not int4_kernel_available():
        raise UnsupportedQuantization(f"--quantization gguf: torch {torch.__version__} has no "
                                      "aten._weight_int4pack_mm_for_cpu")
    return True


@dataclass
class Int4Blocks:
    """One weight matrix as torch's int4 kernel wants it, before packing: codes and per-group numbers."""

    codes: np.ndarray  # uint8 [N, K], 0..15
    scales: np.ndarray  # float32 [N, K / 32]
    zeros: np.ndarray  # float32 [N, K / 32]; value = (code - 8) * scale + zero

    def dequantize(self) -> np.ndarray:
        s = np.repeat(self.scales, GROUP_SIZE, axis=1)
        z = np.repeat(self.zeros, GROUP_SIZE, axis=1)
        return (self.codes.astype(np.float32) - 8) * s + z

    @staticmethod
    def cat(parts: list[Int4Blocks]) -> Int4Blocks:
        """Stacked along N (rows): how q, k, v (or gate and up) become one fused projection."""
        return Int4Blocks(*(np.concatenate([getattr(p, f) for p in parts])
                            for f in ("codes", "scales", "zeros")))


def decode_blocks(raw: np.ndarray, ggml_type: int) -> Int4Blocks:
    """GGUF Q4_0 / Q4_1 rows of bytes [N, K / 32 * block bytes] -> codes, scales and zeros.

    A block is fp16 d (and, for Q4_1, fp16 m), then 16 bytes of codes: weight j is the low nibble of byte
    j, weight j + 16 its high nibble."""
    if ggml_type not in _BLOCK_BYTES:
        raise UnsupportedQuantization(f"ggml type {ggml_type} has no int4 layout here (Q4_0 and Q4_1 do)")
    n, row_bytes = raw.shape
    blocks = np.ascontiguousarray(raw).reshape(n, row_bytes // _BLOCK_BYTES[ggml_type],
                                               _BLOCK_BYTES[ggml_type])
    d = blocks[..., 0:2].copy().view(np.float16)[..., 0].astype(np.float32)
    if ggml_type == Q4_1:
        m = blocks[..., 2:4].copy().view(np.float16)[..., 0].astype(np.float32)
        qs, zeros = blocks[..., 4:], m + 8 * d
    else:
        qs, zeros = blocks[..., 2:], np.zeros_like(d)
    codes = np.concatenate([qs & 0x0F, qs >> 4], axis=-1).reshape(n, -1)
    return Int4Blocks(codes, d, zeros)


def dequantize_reason(ggml_type: int) -> str:
    return _DEQUANT_REASON.get(ggml_type, f"ggml type {ggml_type} has no quantized layout here (Q4_0, Q4_1 "
                                          "and Q8_0 do)")


class GGUFInt4Linear(nn.Module):
    """A linear layer over packed 4-bit weights: y = x @ W.T + b, W never materialized."""

    def __init__(self, blocks: Int4Blocks, bias: torch.Tensor | None, dtype: torch.dtype = torch.bfloat16):
        super().__init__()
        self.out_features, self.in_features = blocks.codes.shape
        codes = torch.from_numpy(blocks.codes.astype(np.int32))
        self.register_buffer("qweight", torch.ops.aten._convert_weight_to_int4pack_for_cpu(codes, 2),
                             persistent=False)
        sz = np.stack([blocks.scales, blocks.zeros], axis=-1).transpose(1, 0, 2)  # [K / 32, N, 2]
        self.register_buffer("scales_and_zeros", torch.from_numpy(np.ascontiguousarray(sz)).to(dtype),
                             persistent=False)
        self.bias = None if bias is None else nn.Parameter(bias.detach(), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, x.shape[-1])
        out = torch.ops.aten._weight_int4pack_mm_for_cpu(rows, self.qweight, GROUP_SIZE,
                                                         self.scales_and_zeros)
        if self.bias is not None:
            out = out + self.bias
        return out.view(*x.shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, gguf int4, group "
                f"{GROUP_SIZE}")


def quantize_linears(model: nn.Module, tensors: dict[str, tuple[int, np.ndarray]],
                     dtype: torch.dtype = torch.bfloat16, cpu_kernels: bool = True) -> set[str]:
    """Swap each Linear whose checkpoint parts are all Q4_0 / Q4_1 for a GGUFQ4Linear (with `cpu_kernels`: the
    C++ kernels are on) or else a GGUFInt4Linear, or all Q8_0 (with `cpu_kernels`) for a GGUFQ8Linear, and a
    Q8_0 embedding (with `cpu_kernels`) for a GGUFQ8Embedding, before the other weights load; returns the
    checkpoint names it took (the loader then skips them). A bias stays a parameter for the checkpoint to
    fill.

    `tensors`: Hugging Face name -> (ggml type, raw rows of bytes), rows already in the model's order."""
    from minisgl.layers.linear import Linear
    from minisgl.layers.quantization.gguf_q4 import GGUFQ4Linear, fuse_q4
    from minisgl.layers.quantization.gguf_q8_0 import GGUFQ8Linear

    taken, swapped, kept = set(), {"int4": 0, "q8_0": 0}, {}
    for name, module in list(model.named_modules()):
        if not isinstance(module, Linear):
            continue
        parts = model.checkpoint_names(f"{name}.weight")
        types = [tensors[p][0] if p in tensors else None for p in parts]
        all_q4 = all(t in INT4_TYPES for t in types)
        fused = fuse_q4([tensors[p] for p in parts]) if cpu_kernels and all_q4 else None  # None: torch's int4
        if fused is not None:  # the C++ kernels are on: they take Q4 blocks too
            layer = GGUFQ4Linear(fused[1], fused[0], module.bias)
            swapped["int4"] += 1
        elif all_q4:
            layer = GGUFInt4Linear(Int4Blocks.cat([decode_blocks(tensors[p][1], tensors[p][0])
                                                   for p in parts]),
                                   module.bias, dtype)
            swapped["int4"] += 1
        elif cpu_kernels and all(t == Q8_0 for t in types):
            layer = GGUFQ8Linear(np.concatenate([np.ascontiguousarray(tensors[p][1]) for p in parts]),
                                 module.bias)
            swapped["q8_0"] += 1
        else:  # the fused layer is dequantized: a part that can't be kept, or parts of two kinds
            odd = [t for t in types if t not in INT4_TYPES and not (cpu_kernels and t == Q8_0)]
            why = ("stored unquantized" if odd[0] is None else dequantize_reason(odd[0])) if odd else \
                "its fused parts are stored in different quantization types"
            kept[why] = kept.get(why, 0) + 1
            continue
        parent, _, attr = name.rpartition(".")
        setattr(model.get_submodule(parent), attr, layer)
        taken.update(parts)
    embedding = quantize_embedding(model, tensors, dtype, cpu_kernels)
    taken |= embedding
    for why, count in kept.items():
        logger.warning("--quantization gguf: %d linear layer(s) dequantized to bfloat16 (%s)", count, why)
    logger.info("--quantization gguf: %d linear layers on int4 blocks, %d on q8_0 blocks; embedding %s",
                swapped["int4"], swapped["q8_0"],
                "on q8_0 blocks (and the tied lm_head)" if embedding else "dequantized")
    return taken


def quantize_embedding(model: nn.Module, tensors: dict[str, tuple[int, np.ndarray]], dtype: torch.dtype,
                       cpu_kernels: bool) -> set[str]:
    """A Q8_0 token embedding kept as blocks; the logits multiply by them too where the model ties the two
    (an untied Q8_0 lm_head gets its own blocks)."""
    from minisgl.layers.quantization.gguf_q8_0 import GGUFQ8Embedding

    names = ("model.embed_tokens.weight", "lm_head.weight")
    if not cpu_kernels or tensors.get(names[0], (None,))[0] != Q8_0:
        return set()
    embedding = GGUFQ8Embedding(tensors[names[0]][1], dtype)
    model.model.embed_tokens = embedding
    if model.lm_head is None:
        model.logits_processor.use_quantized(embedding)
        return {names[0]}
    if tensors.get(names[1], (None,))[0] != Q8_0:
        return {names[0]}
    model.lm_head = GGUFQ8Embedding(tensors[names[1]][1], dtype)
    model.logits_processor.use_quantized(model.lm_head)
    return set(names)
