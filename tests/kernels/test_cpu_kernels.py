"""The CPU kernels against the torch code they replace, on random inputs of the model's shapes.

RMSNorm, SiLU-and-mul and rotary round exactly where the torch code rounds, so in bfloat16 they must be
bit-identical (RMSNorm and rotary in float32 too); test_bit_identity.py checks that on hundreds of seeds,
these on a few. Attention computes in float32 and rounds once at the end: it is
checked against float32 references, to float32 rounding, or to one bfloat16 step.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from minisgl import kernels
from minisgl.layers.rotary_embedding import RotaryEmbedding, _rotate_half
from tests.kernels.conftest import needs_compiler

pytestmark = needs_compiler

DTYPES = [torch.float32, torch.bfloat16]
HIDDEN, HEADS, KV_HEADS, HEAD_DIM, INTER = 576, 9, 3, 64, 1536  # SmolLM2-135M


@pytest.fixture(scope="module", autouse=True)
def built():
    assert kernels.load(), kernels.unavailable_reason()


def close(got: torch.Tensor, want: torch.Tensor, dtype: torch.dtype) -> None:
    if dtype == torch.float32:
        torch.testing.assert_close(got, want, rtol=2e-6, atol=2e-6)
    else:  # one bfloat16 step of the larger value
        step = want.float().abs().clamp(min=1.0) * 2**-7
        assert ((got.float() - want.float()).abs() <= step).all()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows", [1, 7, 64])
def test_rms_norm(dtype, rows):
    g = torch.Generator().manual_seed(rows)
    x = (torch.randn(rows, HIDDEN, generator=g) * 3).to(dtype)
    weight = torch.randn(HIDDEN, generator=g).to(dtype)
    want = weight * F.rms_norm(x.float(), (HIDDEN,), eps=1e-5).to(dtype)
    got = kernels.rms_norm(x, weight, 1e-5)
    if dtype == torch.bfloat16:
        assert torch.equal(got, want)
    else:
        close(got, want, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows", [1, 33])
def test_fused_add_rms_norm_updates_both_in_place(dtype, rows):
    g = torch.Generator().manual_seed(100 + rows)
    x, residual = (torch.randn(rows, HIDDEN, generator=g).to(dtype) for _ in range(2))
    weight = torch.randn(HIDDEN, generator=g).to(dtype)
    want_residual = x + residual
    want = weight * F.rms_norm(want_residual.float(), (HIDDEN,), eps=1e-6).to(dtype)
    kernels.fused_add_rms_norm(x, residual, weight, 1e-6)
    assert torch.equal(residual, want_residual)
    if dtype == torch.bfloat16:
        assert torch.equal(x, want)
    else:
        close(x, want, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_silu_and_mul(dtype):
    g = torch.Generator().manual_seed(7)
    gate_up = (torch.randn(5, 2 * INTER, generator=g) * 4).to(dtype)
    gate, up = gate_up.chunk(2, dim=-1)
    want = F.silu(gate) * up
    got = kernels.silu_and_mul(gate_up)
    if dtype == torch.bfloat16:
        assert torch.equal(got, want)
    else:
        close(got, want, dtype)


def test_silu_extremes_stay_finite():
    gate_up = torch.tensor([[-200.0, -20.0, 0.0, 20.0, 200.0, 1.0, 1.0, 1.0, 1.0, 1.0]])
    got = kernels.silu_and_mul(gate_up)
    want = F.silu(gate_up[:, :5])
    torch.testing.assert_close(got, want, rtol=2e-6, atol=1e-30)


@pytest.mark.parametrize("dtype", DTYPES)
def test_rotary_embedding_in_place_on_views_of_one_qkv(dtype):
    rope = RotaryEmbedding(HEAD_DIM, 4096, 100000.0)
    positions = torch.tensor([0, 1, 5, 63, 64, 1000, 4095])
    g = torch.Generator().manual_seed(3)
    qkv = torch.randn(len(positions), (HEADS + 2 * KV_HEADS) * HEAD_DIM, generator=g).to(dtype)
    q, k, v = qkv.split([HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM], dim=-1)
    q, k = q.reshape(-1, HEADS, HEAD_DIM), k.reshape(-1, KV_HEADS, HEAD_DIM)
    v_before = v.clone()
    cos = rope.cos_cache[positions].to(dtype).unsqueeze(1)
    sin = rope.sin_cache[positions].to(dtype).unsqueeze(1)
    want_q, want_k = q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin
    kernels.rotary_embedding(positions, q, k, rope.cos_cache, rope.sin_cache)
    assert torch.equal(q, want_q) and torch.equal(k, want_k)  # rounded step by step, as the torch code
    assert torch.equal(v, v_before)  # the neighbouring columns of the fused output are untouched


def _paged_case(dtype, seq_lens, slots=700, seed=0, heads=HEADS, kv_heads=KV_HEADS, head_dim=HEAD_DIM):
    """A KV pool with requests scattered over random slots, as after many allocs and frees."""
    g = torch.Generator().manual_seed(seed)
    k_buf = torch.randn(slots, kv_heads, head_dim, generator=g).to(dtype)
    v_buf = torch.randn(slots, kv_heads, head_dim, generator=g).to(dtype)
    req_to_token = torch.zeros(12, 512, dtype=torch.int64)
    req_pool_indices = torch.randperm(12, generator=g)[: len(seq_lens)]
    for row, n in zip(req_pool_indices.tolist(), seq_lens):
        req_to_token[row, :n] = torch.randperm(slots, generator=g)[:n]
    q = torch.randn(len(seq_lens), heads, head_dim, generator=g).to(dtype)
    return q, k_buf, v_buf, req_to_token, req_pool_indices, torch.tensor(seq_lens, dtype=torch.int64)


def _check_against_sdpa(dtype, seq_lens, **shape):
    """The kernel's output for each request equals SDPA over that request's slots, gathered by hand."""
    q, k_buf, v_buf, req_to_token, req_pool_indices, lens = _paged_case(dtype, seq_lens, **shape)
    heads, head_dim = q.shape[1], q.shape[2]
    group = heads // k_buf.shape[1]
    got = kernels.decode_attention(q, k_buf, v_buf, req_to_token, req_pool_indices, lens, head_dim**-0.5)
    for b, (row, n) in enumerate(zip(req_pool_indices.tolist(), seq_lens)):
        slots = req_to_token[row, :n]
        k = k_buf[slots].transpose(0, 1).repeat_interleave(group, dim=0).float()
        v = v_buf[slots].transpose(0, 1).repeat_interleave(group, dim=0).float()
        want = F.scaled_dot_product_attention(q[b].float().unsqueeze(1), k, v, scale=head_dim**-0.5).squeeze(1)
        close(got[b], want.to(dtype), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("seq_lens", [[1], [65], [1, 2, 300, 17, 511]])
def test_decode_attention_reads_slots_in_place(dtype, seq_lens):
    _check_against_sdpa(dtype, seq_lens)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("heads,kv_heads,head_dim", [(4, 4, 32), (14, 2, 128), (6, 2, 80), (8, 1, 16)])
def test_decode_attention_other_head_layouts(dtype, heads, kv_heads, head_dim):
    """Multi-head (group 1), Qwen2-0.5B's 14/2 x 128, a head size with no fast path, multi-query."""
    _check_against_sdpa(dtype, [3, 150, 41], seed=heads, heads=heads, kv_heads=kv_heads, head_dim=head_dim)


@pytest.mark.parametrize("dtype", DTYPES)
def test_decode_attention_rows_of_one_request_share_reads_and_equal_each_row_alone(dtype):
    """A verify forward's rows: one request's rows, each one slot longer than the one before, go as one
    group (they read each K/V row once), beside another request's row; each row equals itself alone."""
    _, k_buf, v_buf, req_to_token, other, _ = _paged_case(dtype, [60], seed=7)
    q = torch.randn(6, HEADS, HEAD_DIM, generator=torch.Generator().manual_seed(8)).to(dtype)
    req_to_token[3, :70] = torch.randperm(700, generator=torch.Generator().manual_seed(9))[:70]
    pools = torch.tensor([3, 3, 3, 3, 3, other[0]], dtype=torch.int64)  # 5 rows of request 3, then another
    lens = torch.tensor([56, 57, 58, 59, 60, 60], dtype=torch.int64)
    together = kernels.decode_attention(q, k_buf, v_buf, req_to_token, pools, lens, HEAD_DIM**-0.5)
    for b in range(6):
        alone = kernels.decode_attention(q[b:b + 1].contiguous(), k_buf, v_buf, req_to_token, pools[b:b + 1],
                                         lens[b:b + 1], HEAD_DIM**-0.5)
        assert torch.equal(together[b:b + 1], alone), f"row {b}"
    k = k_buf[req_to_token[3, :58]].transpose(0, 1).repeat_interleave(HEADS // KV_HEADS, dim=0).float()
    v = v_buf[req_to_token[3, :58]].transpose(0, 1).repeat_interleave(HEADS // KV_HEADS, dim=0).float()
    want = F.scaled_dot_product_attention(q[2].float().unsqueeze(1), k, v, scale=HEAD_DIM**-0.5).squeeze(1)
    close(together[2], want.to(dtype), dtype)


def test_decode_attention_large_scores_do_not_overflow():
    """Scores far above exp's range: the softmax subtracts each row's max first."""
    q, k_buf, v_buf, req_to_token, req_pool_indices, lens = _paged_case(torch.float32, [40], seed=5)
    got = kernels.decode_attention(q * 300, k_buf, v_buf, req_to_token, req_pool_indices, lens, 1.0)
    slots = req_to_token[req_pool_indices[0], :40]
    k = k_buf[slots].transpose(0, 1).repeat_interleave(3, dim=0)
    v = v_buf[slots].transpose(0, 1).repeat_interleave(3, dim=0)
    want = F.scaled_dot_product_attention((q[0] * 300).unsqueeze(1), k, v, scale=1.0).squeeze(1)
    assert torch.isfinite(got).all()
    torch.testing.assert_close(got[0], want, rtol=1e-4, atol=1e-4)


def test_supports_only_cpu_float32_and_bfloat16():
    assert kernels.supports(torch.float32, "cpu") and kernels.supports(torch.bfloat16, "cpu")
    assert not kernels.supports(torch.float16, "cpu")
    assert not kernels.supports(torch.bfloat16, "meta")


# the kernel sums exp() in double: within 1e-6 of float64 at any vocabulary size, on any CPU (a float sum over
# 49k terms was 1e-4 off, by an amount that followed the CPU's vector width; torch's own float32 is 2e-5 off)
LOGPROB_BOUND = 1e-6


def exact_logprobs(logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    return torch.log_softmax(logits.double(), dim=-1).gather(1, ids.unsqueeze(1)).squeeze(1)


@pytest.mark.parametrize("vocab", [1, 15, 37, 49152])
def test_greedy_sample_is_argmax_first_on_ties_with_its_logprob(vocab):
    g = torch.Generator().manual_seed(vocab)
    logits = torch.randn(6, vocab, generator=g) * 5
    logits[1] = 0.0  # all tied: index 0
    if vocab > 20:
        logits[2, 3] = logits[2, 19] = logits[2].max() + 1  # a tie within the first lanes
        logits[3, -1] = 1e4  # the last column, past any whole vector
        logits[4, vocab // 2] = logits[4, vocab - 2] = logits[4].max() + 1
    ids, logprobs = kernels.greedy_sample(logits)
    assert torch.equal(ids, logits.max(dim=-1).indices)
    assert (logprobs.double() - exact_logprobs(logits, ids)).abs().max() < LOGPROB_BOUND


def test_sampler_kernel_path_equals_torch_path_for_greedy_batches():
    from minisgl.layers.sampler import Sampler
    from minisgl.sampling.sampling_params import SamplingParams

    logits = torch.randn(9, 49152, generator=torch.Generator().manual_seed(1)) * 3
    params = [SamplingParams(temperature=0.0)] * 9
    torch_ids, torch_logprobs = Sampler()(logits, params, [0] * 9)
    fast = Sampler()
    fast.use_kernel = True
    ids, logprobs = fast(logits, params, [0] * 9)
    assert torch.equal(ids, torch_ids)
    exact = exact_logprobs(logits, ids)
    assert (logprobs.double() - exact).abs().max() < LOGPROB_BOUND
    assert (torch_logprobs.double() - exact).abs().max() < 1e-4  # the torch path: float32's own rounding
