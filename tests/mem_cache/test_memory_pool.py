"""TokenToKVPool and ReqToTokenPool: slots are handed out at most once, come back on free, and every
misuse (double free, freeing what was never handed out, asking for too much) is a clear error."""

from __future__ import annotations

import random

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from minisgl.mem_cache.memory_pool import KVCacheExhausted, ReqToTokenPool, TokenToKVPool


def kv_pool(size: int = 16, dtype: torch.dtype = torch.float32) -> TokenToKVPool:
    return TokenToKVPool(size, num_layers=2, num_kv_heads=2, head_dim=4, dtype=dtype)


# ---- TokenToKVPool allocator ---------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(size=st.integers(1, 40), seed=st.integers(0, 2**32 - 1))
def test_kv_slots_are_never_handed_out_twice(size, seed):
    rng = random.Random(seed)
    pool = kv_pool(size)
    held: list[torch.Tensor] = []  # one tensor per alloc, freed as a whole or in part
    for _ in range(60):
        in_use = sum(t.numel() for t in held)
        assert pool.available_size() == size - in_use
        if held and rng.random() < 0.45:
            t = held.pop(rng.randrange(len(held)))
            keep = rng.randrange(t.numel() + 1)  # free part of it, in shuffled order, keep the rest
            perm = t[torch.randperm(t.numel(), generator=torch.Generator().manual_seed(rng.randrange(2**31)))]
            pool.free(perm[keep:])
            if keep:
                held.append(perm[:keep])
            continue
        n = rng.randint(0, size - in_use)
        got = pool.alloc(n)
        assert got.dtype == torch.int64 and got.numel() == n
        slots = got.tolist()
        assert 0 not in slots and all(1 <= s <= size for s in slots)
        assert len(set(slots)) == n
        already = {s for t in held for s in t.tolist()}
        assert already.isdisjoint(slots), "a slot was handed out while still held"
        held.append(got)
    for t in held:
        pool.free(t)
    assert pool.available_size() == size
    assert sorted(pool.alloc(size).tolist()) == list(range(1, size + 1))


def test_alloc_takes_lowest_first_and_free_returns_slots():
    pool = kv_pool(8)
    a = pool.alloc(3)
    assert a.tolist() == [1, 2, 3]
    assert pool.available_size() == 5
    pool.free(a[1:])
    assert pool.available_size() == 7
    pool.free(torch.tensor([], dtype=torch.int64))  # freeing nothing is fine
    assert pool.available_size() == 7
    assert pool.alloc(0).numel() == 0
    pool.clear()
    assert pool.available_size() == 8 and pool.alloc(8).tolist() == list(range(1, 9))


def test_kv_double_free_and_freeing_unallocated_slots_raise():
    pool = kv_pool(8)
    a = pool.alloc(3)
    pool.free(a[:1])
    with pytest.raises(ValueError, match="not allocated"):
        pool.free(a[:1])  # double free
    with pytest.raises(ValueError, match="not allocated"):
        pool.free(torch.tensor([7]))  # never handed out
    with pytest.raises(ValueError, match="not allocated"):
        pool.free(torch.tensor([0]))  # the padding slot
    with pytest.raises(ValueError, match="twice"):
        pool.free(torch.tensor([2, 2]))
    for bad in (-1, 9, 100):  # outside the pool: 1..8
        with pytest.raises(ValueError, match="not allocated"):
            pool.free(torch.tensor([bad]))
    assert pool.available_size() == 6  # no failed free changed anything
    pool.free(a[1:])
    assert pool.available_size() == 8


def test_kv_exhaustion_names_asked_and_free_counts():
    pool = kv_pool(8)
    pool.alloc(5)
    with pytest.raises(KVCacheExhausted, match=r"asked for 4 slot\(s\), 3 free of 8"):
        pool.alloc(4)
    assert pool.available_size() == 3  # a refused alloc takes nothing
    assert pool.alloc(3).numel() == 3
    with pytest.raises(KVCacheExhausted, match=r"asked for 1 slot\(s\), 0 free"):
        pool.alloc(1)


def test_set_and_get_kv_buffer_round_trip():
    pool = kv_pool(8, dtype=torch.bfloat16)
    loc = pool.alloc(3)
    k = torch.randn(3, 2, 4)
    v = torch.randn(3, 2, 4)
    pool.set_kv_buffer(1, loc, k, v)
    k_buf, v_buf = pool.get_kv_buffer(1)
    assert k_buf.shape == v_buf.shape == (9, 2, 4) and k_buf.dtype == torch.bfloat16
    assert torch.equal(k_buf[loc], k.to(torch.bfloat16))
    assert torch.equal(v_buf[loc], v.to(torch.bfloat16))
    other = torch.ones(9, dtype=torch.bool)
    other[loc] = False
    assert not k_buf[other].any() and not v_buf[other].any()  # nothing else was written
    k0, v0 = pool.get_kv_buffer(0)
    assert not k0.any() and not v0.any()  # the other layer neither


def test_bytes_per_token_for_smollm2_in_bf16():
    # SmolLM2-135M: 30 layers, 3 KV heads, head_dim 64; K and V, 2 bytes each
    assert TokenToKVPool.bytes_per_token(30, 3, 64, torch.bfloat16) == 23040
    assert TokenToKVPool.bytes_per_token(30, 3, 64, torch.float32) == 46080


# ---- ReqToTokenPool -------------------------------------------------------------------------------------


def test_req_pool_alloc_free_and_exhaustion():
    pool = ReqToTokenPool(3, max_context_len=10)
    assert pool.req_to_token.shape == (3, 10) and pool.req_to_token.dtype == torch.int64
    a = pool.alloc(2)
    assert sorted(a) == [0, 1] and pool.available_size() == 1
    with pytest.raises(KVCacheExhausted, match=r"asked for 2 request slot\(s\), 1 free of 3"):
        pool.alloc(2)
    assert pool.available_size() == 1
    (b,) = pool.alloc(1)
    assert b not in a
    pool.free(a[0])
    assert pool.available_size() == 1
    assert pool.alloc(1) == [a[0]]
    pool.free([a[0], a[1], b])
    assert pool.available_size() == 3


def test_req_pool_double_free_and_bad_slots_raise():
    pool = ReqToTokenPool(3, max_context_len=4)
    a, b = pool.alloc(2)
    pool.free(a)
    with pytest.raises(ValueError, match="not allocated"):
        pool.free(a)  # double free
    with pytest.raises(ValueError, match="not allocated"):
        pool.free(2)  # never handed out
    for bad in (-1, 3):
        with pytest.raises(ValueError, match="not allocated"):
            pool.free(bad)
    with pytest.raises(ValueError, match="twice"):
        pool.free([b, b])  # the same slot twice in one call: it would later be handed out twice
    assert pool.available_size() == 2  # no failed free changed anything
    pool.free(b)
    assert sorted(pool.alloc(3)) == [0, 1, 2]


def test_req_pool_never_hands_out_a_slot_twice():
    rng = random.Random(0)
    pool = ReqToTokenPool(5, max_context_len=2)
    held: set[int] = set()
    for _ in range(500):
        if held and rng.random() < 0.5:
            i = rng.choice(sorted(held))
            pool.free(i)
            held.remove(i)
        elif pool.available_size():
            got = pool.alloc(rng.randint(1, pool.available_size()))
            assert held.isdisjoint(got) and len(set(got)) == len(got)
            held.update(got)
        assert pool.available_size() == 5 - len(held)


def test_negative_sizes_are_refused():
    # a slice [:-1] would otherwise hand out all but one free slot
    kv, req = kv_pool(4), ReqToTokenPool(4, max_context_len=2)
    with pytest.raises(ValueError):
        kv.alloc(-1)
    with pytest.raises(ValueError):
        req.alloc(-1)
    assert kv.available_size() == 4 and req.available_size() == 4


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_pool_buffers_are_zeros_aligned_and_contiguous_like_torch_zeros(dtype):
    """The pools' buffers come from calloc (memory_pool.zeros), not torch.zeros: still zeros, 64-byte
    aligned, contiguous, and writable without touching their neighbours. (Whether a large block's pages are
    paid for only when touched depends on the C library and the process's history, so it is not asserted.)"""
    from minisgl.mem_cache.memory_pool import zeros

    big = zeros((1 << 16, 3, 64), dtype, "cpu")
    assert big.dtype == dtype and big.shape == (1 << 16, 3, 64) and big.is_contiguous()
    assert big.data_ptr() % 64 == 0 and not big.any()
    big[:4096] = 1
    assert int(big[:4096].sum()) == 4096 * 3 * 64 and not big[4096:].any()
    pool = TokenToKVPool(size=100, num_layers=2, num_kv_heads=3, head_dim=64, dtype=dtype)
    assert all(not buf.any() and buf.data_ptr() % 64 == 0 for buf in pool.k_buffer + pool.v_buffer)
    req = ReqToTokenPool(size=4, max_context_len=32)
    assert req.req_to_token.dtype == torch.int64 and not req.req_to_token.any()
