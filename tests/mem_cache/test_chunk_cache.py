"""ChunkCache: RadixCache's interface with no sharing; with it the CacheManager gives every slot back when a
request finishes."""

from __future__ import annotations

import torch

from minisgl.mem_cache.cache_manager import CacheManager
from minisgl.mem_cache.chunk_cache import ChunkCache
from minisgl.mem_cache.memory_pool import ReqToTokenPool, TokenToKVPool

from .test_radix_cache import Req


def make_cache() -> tuple[ChunkCache, CacheManager, ReqToTokenPool, TokenToKVPool]:
    req_pool = ReqToTokenPool(size=4, max_context_len=32)
    kv_pool = TokenToKVPool(32, num_layers=1, num_kv_heads=1, head_dim=2, dtype=torch.float32)
    cache = ChunkCache()
    return cache, CacheManager(cache, req_pool, kv_pool), req_pool, kv_pool


def admit(cache: ChunkCache, req_pool: ReqToTokenPool, kv_pool: TokenToKVPool, req: Req, upto: int) -> None:
    m = cache.match_prefix(req.origin_input_ids)
    req.prefix_indices, req.last_node = m.device_indices, m.last_node
    cache.inc_lock_ref(m.last_node)
    req.req_pool_idx = req_pool.alloc(1)[0]
    req_pool.req_to_token[req.req_pool_idx, :upto] = kv_pool.alloc(upto)


def test_match_always_misses_and_nothing_is_held():
    cache, mgr, _, kv_pool = make_cache()
    value = kv_pool.alloc(3)
    assert cache.insert([1, 2, 3], value) == 0
    m = cache.match_prefix([1, 2, 3])
    assert m.device_indices.dtype == torch.int64 and m.device_indices.numel() == 0
    assert m.last_node is cache.root_node
    assert cache.evict(10) == [] and mgr.evict(10) == []
    assert cache.evictable_size() == cache.protected_size() == cache.total_size() == 0
    assert cache.all_values().numel() == 0
    assert cache.snapshot() == {"id": 0, "key": [], "value": [], "lock_ref": 1, "children": []}
    assert "root" in cache.pretty_print()
    assert cache.reset().numel() == 0
    mgr.flush_cache()
    assert kv_pool.available_size() == kv_pool.size - 3


def test_finished_req_frees_every_slot_and_the_request_slot():
    cache, mgr, req_pool, kv_pool = make_cache()
    a = Req(origin_input_ids=[1, 2, 3], output_ids=[4, 5])
    b = Req(origin_input_ids=[1, 2, 3], output_ids=[9])
    admit(cache, req_pool, kv_pool, a, upto=4)
    admit(cache, req_pool, kv_pool, b, upto=3)
    mgr.cache_finished_req(a)
    assert a.req_pool_idx is None
    assert kv_pool.available_size() == kv_pool.size - 3
    mgr.cache_finished_req(b)
    assert kv_pool.available_size() == kv_pool.size
    assert req_pool.available_size() == req_pool.size


def test_unfinished_then_finished_chunked_prefill():
    cache, mgr, req_pool, kv_pool = make_cache()
    prompt = [1, 2, 3, 4, 5, 6]
    req = Req(origin_input_ids=prompt)
    admit(cache, req_pool, kv_pool, req, upto=3)
    req.fill_ids = prompt[:3]
    mgr.cache_unfinished_req(req)
    row = req_pool.req_to_token[req.req_pool_idx]
    assert req.prefix_indices.tolist() == row[:3].tolist()
    assert kv_pool.available_size() == kv_pool.size - 3

    row[3:6] = kv_pool.alloc(3)
    req.fill_ids = prompt
    mgr.cache_unfinished_req(req)
    assert req.prefix_indices.tolist() == row[:6].tolist()

    req.output_ids = [7]
    mgr.cache_finished_req(req)
    assert kv_pool.available_size() == kv_pool.size
    assert req_pool.available_size() == req_pool.size


def test_the_journal_names_why_slots_were_freed():
    """Nothing is shared, so nothing is inserted: a finished request's slots go back as `finished`,
    a retracted one's as `retracted`, and a chunk boundary moves no slot at all."""
    cache, mgr, req_pool, kv_pool = make_cache()
    mgr.journal = []
    a = Req(origin_input_ids=[1, 2, 3], output_ids=[4], fill_ids=[1, 2, 3])
    b = Req(origin_input_ids=[5, 6], output_ids=[7, 8])
    admit(cache, req_pool, kv_pool, a, upto=3)
    admit(cache, req_pool, kv_pool, b, upto=3)
    a_slots = req_pool.req_to_token[a.req_pool_idx, :3].tolist()
    b_slots = req_pool.req_to_token[b.req_pool_idx, :3].tolist()
    mgr.cache_unfinished_req(a)
    assert mgr.journal == []
    mgr.cache_finished_req(a)
    mgr.cache_finished_req(b, free_reason="retracted")
    assert [(op.kind, op.slots.tolist(), op.reason) for op in mgr.journal] == [
        ("free", a_slots, "finished"), ("free", b_slots, "retracted")]
