"""Packed linear weights (layers/linear.py): the oneDNN path must give what F.linear gives.

Packing only applies to bfloat16 weights on the CPU where torch ships the oneDNN ops; elsewhere the
layers keep the plain path, which these tests also check.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from minisgl.layers.linear import (
    Linear,
    onednn_packing_available,
    pack_weight,
    pack_weight_for_rows,
    packed_linear,
)


def _packing_accepted() -> bool:
    """pack_weight refuses (returns None) where oneDNN's result differs from F.linear on this CPU."""
    if not onednn_packing_available():
        return False
    weight = torch.randn(960, 576, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16)
    return pack_weight(weight) is not None


needs_onednn = pytest.mark.skipif(not _packing_accepted(), reason="no oneDNN linear ops here, or they disagree "
                                  "with F.linear on this CPU, so the engine keeps the plain path")


def test_a_refused_pack_keeps_the_plain_path():
    """Wherever packing is refused, the layer computes exactly F.linear."""
    layer = Linear(576, 960, bias=True).to(torch.bfloat16)
    x = torch.randn(3, 576, dtype=torch.bfloat16)
    if not layer.pack():
        assert layer.packed_weight is None
        assert torch.equal(layer(x), F.linear(x, layer.weight, layer.bias))
    else:
        torch.testing.assert_close(layer(x), F.linear(x, layer.weight, layer.bias), atol=0.05, rtol=0.02)


@needs_onednn
@pytest.mark.parametrize("bias", [False, True])
def test_packed_linear_is_bit_identical_to_f_linear_for_one_row(bias):
    torch.manual_seed(0)
    layer = Linear(576, 960, bias=bias).to(torch.bfloat16)
    x = torch.randn(1, 576, dtype=torch.bfloat16)
    plain = layer(x)
    assert layer.pack() and layer.packed_weight is not None
    assert torch.equal(layer(x), plain)


@needs_onednn
def test_packed_linear_keeps_leading_dims_and_stays_close_for_many_rows():
    torch.manual_seed(0)
    layer = Linear(64, 48, bias=True).to(torch.bfloat16)
    x = torch.randn(2, 7, 64, dtype=torch.bfloat16)
    plain = F.linear(x, layer.weight, layer.bias)
    layer.pack()
    out = layer(x)
    assert out.shape == (2, 7, 48) and out.dtype == torch.bfloat16
    torch.testing.assert_close(out, plain, atol=0.05, rtol=0.02)  # bf16 sums may round in another order


def test_float32_weights_are_not_packed_and_keep_the_plain_path():
    layer = Linear(16, 8)
    assert pack_weight(layer.weight) is None
    assert not layer.pack() and layer.packed_weight is None
    x = torch.randn(3, 16)
    assert torch.equal(layer(x), F.linear(x, layer.weight, layer.bias))


@needs_onednn
@pytest.mark.slow
def test_bf16_model_packs_everything_and_agrees_with_the_plain_path(bundled_source, model_config, chat_prompt_ids):
    """The real bf16 model: every projection and the tied lm_head are packed at load. A batch-1 DECODE
    over the same KV gives bit-identical logits packed or not; a many-row EXTEND agrees within bf16
    rounding (its sums may be added in another order)."""
    from minisgl.model_executor.model_runner import ModelRunner
    from minisgl.model_executor.static_generate import decode, extend
    from minisgl.server_args import ServerArgs

    # quantization none: the dequantized bf16 weights (the default keeps the GGUF file's blocks instead)
    runner = ModelRunner(model_config, bundled_source, ServerArgs(dtype="bfloat16", quantization="none",
                                                                  max_total_tokens=2048, max_running_requests=8))
    layers = [m for m in runner.model.modules() if isinstance(m, Linear)]
    head = runner.model.logits_processor
    assert layers and all(m.packed_weight is not None for m in layers) and head.packed_lm_head is not None
    packed = [m.packed_weight for m in layers], head.packed_lm_head

    def use_packed(on: bool) -> None:
        for m, w in zip(layers, packed[0]):
            m.packed_weight = w if on else None
        head.packed_lm_head = packed[1] if on else None

    prompts = chat_prompt_ids[:3]
    idxs = runner.req_to_token_pool.alloc(len(prompts))
    taken = []
    try:
        logits = {}
        for on in (True, False):
            use_packed(on)
            logits[on], loc = extend(runner, idxs, prompts, [0] * len(prompts))
            taken.append(loc)  # the second EXTEND rewrites the rows: both runs leave the same KV behind
        scale = logits[False].abs().max()
        assert (logits[True] - logits[False]).abs().max() <= 0.03 * scale
        one = idxs[:1]
        step = {}
        for on in (True, False):
            use_packed(on)
            step[on], loc = decode(runner, one, [7], [len(prompts[0]) + 1])
            taken.append(loc)
        assert torch.equal(step[True], step[False])
    finally:
        use_packed(True)
        runner.token_to_kv_pool.free(torch.cat(taken))
        runner.req_to_token_pool.free(idxs)


@pytest.mark.skipif(not onednn_packing_available(), reason="no oneDNN linear ops in this torch")
def test_float32_weights_packed_for_verify_rows_agree_to_float32_rounding():
    """What a speculative verify forward runs on: 5 rows through the packed copy, against F.linear."""
    gen = torch.Generator().manual_seed(0)
    weight, bias = torch.randn(1536, 576, generator=gen), torch.randn(1536, generator=gen)
    packed = pack_weight_for_rows(weight, 5)
    assert packed is not None and pack_weight_for_rows(weight.to(torch.bfloat16), 5) is None  # float32 only
    for rows in (1, 5, 7):
        x = torch.randn(rows, 576, generator=gen)
        torch.testing.assert_close(packed_linear(x, packed, bias), F.linear(x, weight, bias), rtol=1e-5, atol=1e-4)


@pytest.mark.skipif(not onednn_packing_available(), reason="no oneDNN linear ops in this torch")
def test_a_weights_verify_packing_is_made_once_and_dropped_with_it():
    """Every runner over the same weights (Engine.fork with speculation) gets the one packed copy per row
    count; a new weight gets its own, and the copies go when their weight goes."""
    import gc

    from minisgl.layers import linear

    weight = torch.randn(192, 576)
    first = pack_weight_for_rows(weight, 5)
    assert pack_weight_for_rows(weight, 5) is first
    assert pack_weight_for_rows(weight, 3) is not first and pack_weight_for_rows(weight.clone(), 5) is not first
    held = len(linear._packed_for_rows)
    del weight, first
    gc.collect()
    assert len(linear._packed_for_rows) < held
