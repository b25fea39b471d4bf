"""CacheManager: the one place KV slots change owner (pool, request, tree), for the radix and the chunk cache.

The request lifecycle against a RadixCache and real pools, and the journal the scheduler's tracing reads.
ChunkCache's lifecycle is in test_chunk_cache.py.
"""

from __future__ import annotations

import pytest
import torch

from minisgl.mem_cache.cache_manager import CacheManager
from minisgl.mem_cache.memory_pool import ReqToTokenPool, TokenToKVPool
from minisgl.mem_cache.radix_cache import RadixCache

from .test_radix_cache import Req, admit, assert_accounting, insert_fresh, make_cache


def test_cache_finished_req_two_requests_sharing_prefix():
    cache, mgr, req_pool, kv_pool = make_cache()
    a = Req(origin_input_ids=[1, 2, 3, 4], output_ids=[10, 11])
    b = Req(origin_input_ids=[1, 2, 3, 5], output_ids=[20])
    admit(cache, req_pool, kv_pool, a, upto=5)
    admit(cache, req_pool, kv_pool, b, upto=4)
    assert len(b.prefix_indices) == 0
    mgr.cache_finished_req(a)
    assert a.req_pool_idx is None
    assert cache.total_size() == 5
    mgr.cache_finished_req(b)
    assert cache.total_size() == 5 + 1
    assert req_pool.available_size() == req_pool.size
    assert cache.protected_size() == 0
    assert_accounting(cache, kv_pool)

    c = Req(origin_input_ids=[1, 2, 3, 4, 10, 11, 12], output_ids=[30])
    admit(cache, req_pool, kv_pool, c, upto=7)
    assert len(c.prefix_indices) == 5
    assert cache.protected_size() == 5
    mgr.cache_finished_req(c)
    assert cache.protected_size() == 0 and cache.total_size() == 8
    assert_accounting(cache, kv_pool)


def test_cache_unfinished_then_finished_chunked_prefill():
    cache, mgr, req_pool, kv_pool = make_cache()
    other = Req(origin_input_ids=[1, 2, 3, 4, 5, 6, 7], output_ids=[8])
    prompt = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    req = Req(origin_input_ids=prompt)

    admit(cache, req_pool, kv_pool, req, upto=4)
    req.fill_ids = prompt[:4]
    admit(cache, req_pool, kv_pool, other, upto=7)
    mgr.cache_finished_req(other)
    mgr.cache_unfinished_req(req)
    assert len(req.prefix_indices) == 4
    assert req.last_node.lock_ref == 1
    assert cache.protected_size() == 4
    assert_accounting(cache, kv_pool, held=0)

    row = req_pool.req_to_token[req.req_pool_idx]
    row[4:10] = kv_pool.alloc(6)
    req.fill_ids = prompt
    mgr.cache_unfinished_req(req)
    tree_slots = cache.match_prefix(prompt).device_indices
    assert req.prefix_indices.tolist() == tree_slots.tolist() == row[:10].tolist()
    assert cache.protected_size() == 10
    assert_accounting(cache, kv_pool)

    req.output_ids = [42]
    mgr.cache_finished_req(req)
    assert req.req_pool_idx is None
    assert req_pool.available_size() == req_pool.size
    assert cache.protected_size() == 0 and cache.total_size() == 10
    assert_accounting(cache, kv_pool)


def test_cache_unfinished_req_adopts_slots_inserted_by_another_request():
    cache, mgr, req_pool, kv_pool = make_cache()
    a = Req(origin_input_ids=[1, 2, 3, 4])
    b = Req(origin_input_ids=[1, 2, 3, 4])
    admit(cache, req_pool, kv_pool, a, upto=4)
    admit(cache, req_pool, kv_pool, b, upto=4)
    a.fill_ids = b.fill_ids = [1, 2, 3, 4]
    mgr.cache_unfinished_req(a)
    mgr.cache_unfinished_req(b)
    assert b.prefix_indices.tolist() == a.prefix_indices.tolist()
    assert req_pool.req_to_token[b.req_pool_idx, :4].tolist() == a.prefix_indices.tolist()
    assert cache.protected_size() == 4 and cache.match_prefix([1, 2, 3, 4]).last_node.lock_ref == 2
    assert_accounting(cache, kv_pool)


def test_flush_frees_everything_and_refuses_when_locked():
    cache, mgr, _, kv_pool = make_cache()
    insert_fresh(cache, kv_pool, [1, 2, 3])
    insert_fresh(cache, kv_pool, [1, 4])
    node = cache.match_prefix([1, 4]).last_node
    cache.inc_lock_ref(node)
    with pytest.raises(RuntimeError, match="locked"):
        mgr.flush_cache()
    cache.dec_lock_ref(node)
    mgr.flush_cache()
    assert kv_pool.available_size() == kv_pool.size
    assert cache.total_size() == 0 and cache.evictable_size() == 0
    assert cache.snapshot() == {"id": 0, "key": [], "value": [], "lock_ref": 1, "children": []}
    insert_fresh(cache, kv_pool, [5])
    mgr.flush_cache()
    assert kv_pool.available_size() == kv_pool.size


def test_alloc_token_slots_evicts_only_what_is_short():
    cache, mgr, _, kv_pool = make_cache(kv_size=6)
    insert_fresh(cache, kv_pool, [1, 2, 3])
    insert_fresh(cache, kv_pool, [4, 5])
    assert kv_pool.available_size() == 1
    slots = mgr.alloc_token_slots(3)  # 2 short: the least recently used leaf [1, 2, 3] goes
    assert slots.numel() == 3 and kv_pool.available_size() == 1
    assert cache.match_prefix([1, 2, 3]).device_indices.numel() == 0
    assert cache.match_prefix([4, 5]).device_indices.numel() == 2
    assert_accounting(cache, kv_pool, held=3)


def test_the_journal_is_off_unless_asked():
    cache, mgr, req_pool, kv_pool = make_cache()
    req = Req(origin_input_ids=[1, 2, 3], output_ids=[4])
    admit(cache, req_pool, kv_pool, req, upto=3)
    mgr.cache_finished_req(req)
    mgr.evict(10)
    assert mgr.journal is None


def test_the_journal_lists_every_move_in_order():
    """alloc, the duplicates a finished request frees, what the tree took from it, then an eviction."""
    req_pool = ReqToTokenPool(size=4, max_context_len=32)
    kv_pool = TokenToKVPool(16, num_layers=1, num_kv_heads=1, head_dim=2, dtype=torch.float32)
    cache = RadixCache()
    mgr = CacheManager(cache, req_pool, kv_pool)
    mgr.journal = []
    a = Req(origin_input_ids=[1, 2, 3], output_ids=[9], rid="a")
    b = Req(origin_input_ids=[1, 2, 3], output_ids=[8], rid="b")
    for req in (a, b):
        req.prefix_indices, req.last_node = cache.match_prefix(req.origin_input_ids).device_indices, cache.root_node
        req.req_pool_idx = req_pool.alloc(1)[0]
        req_pool.req_to_token[req.req_pool_idx, :3] = mgr.alloc_token_slots(3)
    a_slots = req_pool.req_to_token[a.req_pool_idx, :3].tolist()
    b_slots = req_pool.req_to_token[b.req_pool_idx, :3].tolist()
    mgr.cache_finished_req(a)
    mgr.cache_finished_req(b)  # b computed the same prompt: the tree keeps a's copy, b's is a duplicate
    evicted = mgr.evict(1)
    ops = [(op.kind, op.slots.tolist(), op.reason, op.rid) for op in mgr.journal]
    assert ops == [
        ("alloc", a_slots, None, None),
        ("alloc", b_slots, None, None),
        ("insert", a_slots, None, a.rid),
        ("free", b_slots, "duplicate", None),
        ("insert", [], None, b.rid),
        ("free", a_slots, "evicted", None),
        ("evict", a_slots, None, None),
    ]
    assert evicted == a_slots and kv_pool.available_size() == kv_pool.size


def test_a_journal_entry_keeps_the_slots_it_saw():
    """A freed request row is reused later: the journal holds a copy, not a view of the row."""
    cache, mgr, req_pool, kv_pool = make_cache()
    mgr.journal = []
    req = Req(origin_input_ids=[1, 2, 3], output_ids=[4])
    admit(cache, req_pool, kv_pool, req, upto=3)
    row = req_pool.req_to_token[req.req_pool_idx]
    slots = row[:3].tolist()
    mgr.cache_finished_req(req)
    row[:3] = 0
    assert mgr.journal[-1].kind == "insert" and mgr.journal[-1].slots.tolist() == slots
