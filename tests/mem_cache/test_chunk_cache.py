"""ChunkCache: RadixCache's interface with no sharing; every slot goes back when a request finishes."""

from __future__ import annotations

import torch

from minisgl.mem_cache.chunk_cache import ChunkCache
from minisgl.mem_cache.memory_pool import ReqToTokenPool, TokenToKVPool

from .test_radix_cache import Req


def make_cache() -> tuple[ChunkCache, ReqToTokenPool, TokenToKVPool]:
    req_pool = ReqToTokenPool(size=4, max_context_len=32)
    kv_pool = TokenToKVPool(32, num_layers=1, num_kv_heads=1, head_dim=2, dtype=torch.float32)
    return ChunkCache(req_pool, kv_pool), req_pool, kv_pool


def admit(cache: ChunkCache, req_pool: ReqToTokenPool, kv_pool: TokenToKVPool, req: Req, upto: int) -> None:
    m = cache.match_prefix(req.origin_input_ids)
    req.prefix_indices, req.last_node = m.device_indices, m.last_node
    cache.inc_lock_ref(m.last_node)
    req.req_pool_idx = req_pool.alloc(1)[0]
    req_pool.req_to_token[req.req_pool_idx, :upto] = kv_pool.alloc(upto)


def test_match_always_misses_and_nothing_is_held():
    cache, _, kv_pool = make_cache()
    value = kv_pool.alloc(3)
    assert cache.insert([1, 2, 3], value) == 0
    m = cache.match_prefix([1, 2, 3])
    assert m.device_indices.dtype == torch.int64 and m.device_indices.numel() == 0
    assert m.last_node is cache.root_node
    assert cache.evict(10) == []
    assert cache.evictable_size() == cache.protected_size() == cache.total_size() == 0
    assert cache.all_values().numel() == 0
    assert cache.snapshot() == {"id": 0, "key": [], "value": [], "lock_ref": 1, "children": []}
    assert "root" in cache.pretty_print()
    cache.flush_cache()
    cache.reset()
    assert kv_pool.available_size() == kv_pool.size - 3


def test_finished_req_frees_every_slot_and_the_request_slot():
    cache, req_pool, kv_pool = make_cache()
    a = Req(origin_input_ids=[1, 2, 3], output_ids=[4, 5])
    b = Req(origin_input_ids=[1, 2, 3], output_ids=[9])
    admit(cache, req_pool, kv_pool, a, upto=4)
    admit(cache, req_pool, kv_pool, b, upto=3)
    cache.cache_finished_req(a)
    assert a.req_pool_idx is None
    assert kv_pool.available_size() == kv_pool.size - 3
    cache.cache_finished_req(b)
    assert kv_pool.available_size() == kv_pool.size
    assert req_pool.available_size() == req_pool.size


def test_unfinished_then_finished_chunked_prefill():
    cache, req_pool, kv_pool = make_cache()
    prompt = [1, 2, 3, 4, 5, 6]
    req = Req(origin_input_ids=prompt)
    admit(cache, req_pool, kv_pool, req, upto=3)
    req.fill_ids = prompt[:3]
    cache.cache_unfinished_req(req)
    row = req_pool.req_to_token[req.req_pool_idx]
    assert req.prefix_indices.tolist() == row[:3].tolist()
    assert kv_pool.available_size() == kv_pool.size - 3

    row[3:6] = kv_pool.alloc(3)
    req.fill_ids = prompt
    cache.cache_unfinished_req(req)
    assert req.prefix_indices.tolist() == row[:6].tolist()

    req.output_ids = [7]
    cache.cache_finished_req(req)
    assert kv_pool.available_size() == kv_pool.size
    assert req_pool.available_size() == req_pool.size
