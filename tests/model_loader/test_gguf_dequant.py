"""minisgl's torch dequantization gives, for every tensor of the bundled GGUF file, exactly the float32
weights of the gguf package's numpy code (what transformers loads), and the same for Q4_0 and Q8_0 blocks
made up here with every code and awkward scales (subnormal, negative zero, large)."""

from __future__ import annotations

import numpy as np
import pytest
from gguf.constants import GGMLQuantizationType
from gguf.quants import dequantize as reference

from minisgl.model_loader.gguf_dequant import BLOCK_BYTES, Q4_0, Q4_1, Q8_0, dequantize
from minisgl.model_loader.gguf_file import GGUFFile


def _same(data: np.ndarray, ggml_type: int) -> None:
    ours = dequantize(data, ggml_type)
    ref = np.asarray(reference(data, GGMLQuantizationType(ggml_type)), dtype=np.float32)
    assert ours.dtype == np.float32 and ours.shape == ref.shape
    assert np.array_equal(ours.view(np.uint32), ref.view(np.uint32))  # bit for bit, signs of zero included


def test_every_tensor_of_the_bundled_file(bundled_source):
    types = set()
    for t in GGUFFile(bundled_source.path).tensors:
        types.add(int(t.tensor_type))
        _same(t.data, int(t.tensor_type))
    assert {Q4_1, Q8_0} <= types


@pytest.mark.parametrize("ggml_type", [Q4_0, Q4_1, Q8_0])
def test_made_up_blocks_with_every_code_and_odd_scales(ggml_type):
    rng = np.random.default_rng(ggml_type)
    size = BLOCK_BYTES[ggml_type]
    data = rng.integers(0, 256, size=(64, 4 * size), dtype=np.uint8)  # 64 rows of 4 blocks: every code
    scales = np.array([1e-7, -0.0, 0.0, 65504.0, -3.5, 0.1, 6e-8, -1e-3], dtype=np.float16).view(np.uint8)
    blocks = data.reshape(-1, size)
    for i in range(len(blocks)):
        blocks[i, 0:2] = scales.reshape(-1, 2)[i % 8]
        if ggml_type == Q4_1:
            blocks[i, 2:4] = scales.reshape(-1, 2)[(i + 3) % 8]
    _same(data, ggml_type)
