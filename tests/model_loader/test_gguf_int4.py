"""--quantization gguf (layers/quantization/gguf.py): GGUF's 4-bit blocks in torch's int4 CPU kernel.

Checks, on real tensors of the bundled Q4_1 file, that decoding the blocks gives gguf's own dequantized
values exactly, and that the int4 product equals the dequantized-weight bfloat16 product within bfloat16
rounding; and that the combinations it cannot run are refused in one clear line.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from minisgl.layers.quantization.gguf import (
    Q4_0,
    Q4_1,
    GGUFInt4Linear,
    Int4Blocks,
    UnsupportedQuantization,
    check_supported,
    decode_blocks,
    int4_kernel_available,
)
from minisgl.model_loader.gguf_weights import read_gguf_linear_blocks
from minisgl.server_args import ServerArgs

needs_kernel = pytest.mark.skipif(not int4_kernel_available(), reason="this torch has no int4 cpu kernel")
LAYERS = ["model.layers.0.self_attn.q_proj.weight", "model.layers.15.self_attn.k_proj.weight",
          "model.layers.29.mlp.down_proj.weight", "model.layers.7.mlp.gate_proj.weight"]


@pytest.fixture(scope="module")
def blocks(bundled_source, model_config):
    return read_gguf_linear_blocks(bundled_source.path, model_config)


def _gguf_dequantize(raw: np.ndarray, ggml_type: int) -> np.ndarray:
    from gguf.constants import GGMLQuantizationType
    from gguf.quants import dequantize

    return np.asarray(dequantize(raw, GGMLQuantizationType(ggml_type)), dtype=np.float32)


@pytest.mark.parametrize("name", LAYERS)
def test_q4_1_blocks_decode_to_ggufs_own_values(blocks, name):
    ggml_type, raw = blocks[name]
    assert ggml_type == Q4_1
    b = decode_blocks(raw, ggml_type)
    assert b.codes.max() <= 15 and b.scales.shape == (raw.shape[0], b.codes.shape[1] // 32)
    np.testing.assert_array_equal(b.dequantize(), _gguf_dequantize(raw, ggml_type).reshape(b.codes.shape))


def test_q4_0_blocks_decode_to_ggufs_own_values():
    from gguf.constants import GGMLQuantizationType
    from gguf.quants import quantize

    w = np.random.default_rng(0).standard_normal((48, 128)).astype(np.float32)
    raw = quantize(w, GGMLQuantizationType.Q4_0)
    b = decode_blocks(raw, Q4_0)
    assert not b.zeros.any()
    np.testing.assert_array_equal(b.dequantize(), _gguf_dequantize(raw, Q4_0).reshape(w.shape))


@needs_kernel
def test_torchs_int4_kernel_computes_code_minus_8_times_scale_plus_zero():
    """The convention the block mapping rests on, on a small matrix with random codes, scales and zeros."""
    g = torch.Generator().manual_seed(0)
    codes = torch.randint(0, 16, (64, 96), generator=g).to(torch.uint8).numpy()
    b = Int4Blocks(codes, (torch.rand(64, 3, generator=g) * 0.01).numpy(), (torch.randn(64, 3, generator=g) * 0.05).numpy())
    b.scales, b.zeros = (torch.from_numpy(a).to(torch.bfloat16).float().numpy() for a in (b.scales, b.zeros))
    x = torch.randn(4, 96, generator=g).to(torch.bfloat16)
    want = x.double() @ torch.from_numpy(b.dequantize()).double().t()
    torch.testing.assert_close(GGUFInt4Linear(b, None)(x).double(), want, rtol=2**-7, atol=2**-8 * want.abs().max().item())


@needs_kernel
@pytest.mark.parametrize("batch", [1, 8])
@pytest.mark.parametrize("name", LAYERS)
def test_int4_matmul_equals_dequantized_bf16_matmul_within_bf16_rounding(blocks, name, batch):
    ggml_type, raw = blocks[name]
    w = torch.from_numpy(_gguf_dequantize(raw, ggml_type).reshape(raw.shape[0], -1))
    x = torch.randn(batch, w.shape[1], generator=torch.Generator().manual_seed(batch)).to(torch.bfloat16)
    exact = x.double() @ w.double().t()
    deq = (x @ w.to(torch.bfloat16).t()).double()  # what --quantization none computes
    got = GGUFInt4Linear(decode_blocks(raw, ggml_type), None)(x).double()
    assert got.shape == (batch, w.shape[0])
    # bf16 keeps 8 bits: both products carry an output rounding of up to 2^-8 relative; the int4 one adds the
    # rounding of its scales and zeros to bf16, which is of the same size (measured: 1.0-1.5x the error)
    assert (got - exact).abs().max() <= 2 * (deq - exact).abs().max()
    torch.testing.assert_close(got, deq, rtol=2**-7, atol=2**-8 * exact.abs().max().item())


def test_fused_parts_stack_along_rows(blocks):
    parts = [decode_blocks(raw, t) for t, raw in (blocks[f"model.layers.3.self_attn.{p}_proj.weight"] for p in "qkv")]
    fused = Int4Blocks.cat(parts)
    assert fused.codes.shape == (sum(p.codes.shape[0] for p in parts), parts[0].codes.shape[1])
    np.testing.assert_array_equal(fused.dequantize()[-parts[2].codes.shape[0]:], parts[2].dequantize())


def test_unsupported_combinations_are_refused_in_one_line():
    cpu = torch.device("cpu")
    assert check_supported(None, "gguf", cpu, torch.float32) is False  # float32: always dequantized
    assert check_supported(None, "gguf", cpu, torch.bfloat16) is True  # the default keeps the blocks
    assert check_supported(None, "hf", cpu, torch.bfloat16) is False
    assert check_supported(None, "gguf", torch.device("cuda"), torch.bfloat16) is False
    assert check_supported("none", "gguf", cpu, torch.bfloat16) is False
    assert check_supported("none", "hf", cpu, torch.float32) is False
    with pytest.raises(UnsupportedQuantization, match="float32 is the exact"):
        check_supported("gguf", "gguf", cpu, torch.float32)
    with pytest.raises(UnsupportedQuantization, match="needs a .gguf model"):
        check_supported("gguf", "hf", cpu, torch.bfloat16)
    with pytest.raises(UnsupportedQuantization, match="--device cpu and --dtype bfloat16"):
        check_supported("gguf", "gguf", cpu, torch.float16)
    with pytest.raises(UnsupportedQuantization, match="no int4 layout"):
        decode_blocks(np.zeros((2, 34), np.uint8), 8)  # Q8_0: dequantized instead
    with pytest.raises(ValueError, match="--quantization must be none or gguf"):
        ServerArgs(quantization="awq").validate()
    with pytest.raises(ValueError, match="float32 is the exact"):
        ServerArgs(quantization="gguf", dtype="float32").validate()
    ServerArgs(quantization="gguf").validate()  # auto: bfloat16 on cpu


def test_the_runner_refuses_before_loading_any_weight(bundled_source, model_config):
    from minisgl.model_executor.model_runner import ModelRunner

    with pytest.raises(UnsupportedQuantization, match="float32 is the exact"):
        ModelRunner(model_config, bundled_source, ServerArgs(dtype="float32", quantization="gguf"))


@needs_kernel
def test_a_fused_layer_with_parts_of_two_types_stays_dequantized_and_says_why(blocks, caplog):
    from torch import nn

    from minisgl.layers.linear import Linear
    from minisgl.layers.quantization.gguf import Q8_0, quantize_linears
    from minisgl.layers.quantization.gguf_q4 import GGUFQ4Linear

    class Tiny(nn.Module):  # one fused projection of two checkpoint parts, another of one
        def __init__(self):
            super().__init__()
            self.fused, self.single = Linear(576, 2 * 576, bias=False), Linear(576, 576, bias=False)

        def checkpoint_names(self, name):
            return [name.replace("fused", "a"), name.replace("fused", "b")] if "fused" in name else [name]

    q4 = blocks["model.layers.0.self_attn.o_proj.weight"]
    tensors = {"a.weight": q4, "b.weight": (Q8_0, np.zeros((576, 576 // 32 * 34), np.uint8)), "single.weight": q4}
    model = Tiny()
    with caplog.at_level("INFO"):
        assert quantize_linears(model, tensors) == {"single.weight"}
    assert isinstance(model.fused, Linear) and isinstance(model.single, GGUFQ4Linear)  # the C++ kernel's
    assert "1 linear layer(s) dequantized to bfloat16 (its fused parts are stored in different" in caplog.text
    model = Tiny()  # without the C++ kernels, Q8_0 itself is the reason, and Q4 runs in torch's int4 kernel
    with caplog.at_level("INFO"):
        assert quantize_linears(model, tensors, cpu_kernels=False) == {"single.weight"}
    assert isinstance(model.single, GGUFInt4Linear)
    assert "1 linear layer(s) dequantized to bfloat16 (Q8_0 runs in the C++ cpu kernels" in caplog.text
