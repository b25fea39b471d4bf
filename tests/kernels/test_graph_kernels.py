"""The three small kernels that took the torch ops out of a decode forward (kernels/csrc/graph.cpp), each
bit for bit the torch op it replaces, and the recording itself (kernels/graph.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from minisgl import kernels
from minisgl.kernels import graph

pytestmark = pytest.mark.skipif(not kernels.load(), reason="the C++ cpu kernels did not build here")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_kv_write_is_index_copy_for_strided_rows(dtype):
    g = torch.Generator().manual_seed(0)
    qkv = torch.randn(5, 3 * 2 * 8, generator=g).to(dtype)  # 5 rows of a fused qkv output
    k = qkv[:, 16:32].view(5, 2, 8)  # a view: rows 48 apart
    loc = torch.tensor([7, 2, 9, 3, 11])
    want = torch.randn(12, 2, 8, generator=g).to(dtype)
    got = want.clone()
    want.index_copy_(0, loc, k)
    kernels.kv_write(got, loc, k)
    assert torch.equal(got, want)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_q8_0_embedding_rows_are_the_dequantized_tables(dtype):
    from gguf.constants import GGMLQuantizationType
    from gguf.quants import dequantize, quantize

    rng = np.random.default_rng(1)
    raw = quantize(rng.standard_normal((20, 96)).astype(np.float32), GGMLQuantizationType.Q8_0)
    table = torch.from_numpy(np.asarray(dequantize(raw, GGMLQuantizationType.Q8_0), dtype=np.float32)).to(dtype)
    ids = torch.tensor([[3, 0], [19, 3]])
    packed = kernels.pack_blocks(torch.from_numpy(np.ascontiguousarray(raw)), kernels.Q8_0)
    got = kernels.q8_0_embedding(ids, packed, 96, dtype)
    assert got.shape == (2, 2, 96) and got.dtype == dtype
    assert torch.equal(got, table[ids])


def test_bf16_to_f32_is_float():
    x = torch.tensor([1.5, -0.0, float("inf"), float("nan"), 3e-39, -2.75e38]).to(torch.bfloat16)
    got = kernels.bf16_to_f32(x.view(2, 3))
    assert got.dtype == torch.float32 and got.shape == (2, 3)
    assert torch.equal(got.view(-1).view(torch.int32), x.float().view(torch.int32))


def test_a_recorded_call_replays_on_the_memory_it_recorded():
    x = torch.randn(3, 64).to(torch.bfloat16)
    w = torch.ones(64, dtype=torch.bfloat16)
    with graph.record() as recorder:
        out = kernels.rms_norm(x, w, 1e-6)
    recorded = recorder.graph()
    assert recorded.kernel_names() == ["rms_norm"]
    first = out.clone()
    x.copy_(torch.randn(3, 64))  # new input in the same memory (a static input buffer)
    recorded.replay()
    assert not torch.equal(out, first)
    assert torch.equal(out, kernels.rms_norm(x, w, 1e-6))
    assert not kernels._recorders  # closed


def test_recordings_do_not_nest_and_another_threads_calls_are_not_recorded():
    import threading

    x, w = torch.randn(2, 32), torch.ones(32)
    with graph.record() as recorder:
        with pytest.raises(RuntimeError, match="already recording"):
            with graph.record():
                pass
        other = threading.Thread(target=kernels.rms_norm, args=(x, w, 1e-6))
        other.start()
        other.join()
        kernels.rms_norm(x, w, 1e-6)
    assert recorder.graph().kernel_names() == ["rms_norm"]  # this thread's one call only
    assert not kernels._recorders
