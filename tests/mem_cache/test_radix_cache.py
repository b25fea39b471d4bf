"""RadixCache, the pure tree: matching, splitting, locking and LRU eviction. Slot accounting against real
pools goes through the CacheManager, which frees what the tree gives back (test_cache_manager.py has the
request lifecycle)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minisgl.mem_cache.cache_manager import CacheManager
from minisgl.mem_cache.memory_pool import ReqToTokenPool, TokenToKVPool
from minisgl.mem_cache.radix_cache import RadixCache, TreeNode

KV_SIZE = 64


@dataclass
class Req:
    origin_input_ids: list[int]
    output_ids: list[int] = field(default_factory=list)
    fill_ids: list[int] = field(default_factory=list)
    req_pool_idx: int | None = None
    prefix_indices: torch.Tensor = field(default_factory=lambda: torch.empty(0, dtype=torch.int64))
    last_node: TreeNode | None = None
    rid: str = "req"


def make_cache(kv_size: int = KV_SIZE) -> tuple[RadixCache, CacheManager, ReqToTokenPool, TokenToKVPool]:
    """A tree, the CacheManager that frees what it evicts, and the pools it takes slots from."""
    req_pool = ReqToTokenPool(size=4, max_context_len=32)
    kv_pool = TokenToKVPool(kv_size, num_layers=1, num_kv_heads=1, head_dim=2, dtype=torch.float32)
    cache = RadixCache()
    return cache, CacheManager(cache, req_pool, kv_pool), req_pool, kv_pool


def insert_fresh(cache: RadixCache, kv_pool: TokenToKVPool, key: list[int]) -> int:
    """Insert key with newly allocated slots and free the duplicates, as the scheduler would."""
    value = kv_pool.alloc(len(key))
    n = cache.insert(key, value)
    kv_pool.free(value[:n])
    return n


def admit(cache: RadixCache, req_pool: ReqToTokenPool, kv_pool: TokenToKVPool, req: Req, upto: int) -> None:
    """Match, lock, take a request slot and allocate KV for tokens [prefix, upto), like the scheduler."""
    m = cache.match_prefix(req.origin_input_ids[:upto])
    req.prefix_indices, req.last_node = m.device_indices, m.last_node
    cache.inc_lock_ref(m.last_node)
    req.req_pool_idx = req_pool.alloc(1)[0]
    row = req_pool.req_to_token[req.req_pool_idx]
    n = len(m.device_indices)
    row[:n] = m.device_indices
    row[n:upto] = kv_pool.alloc(upto - n)


def assert_accounting(cache: RadixCache, kv_pool: TokenToKVPool, held: int = 0) -> None:
    assert kv_pool.available_size() + cache.total_size() + held == kv_pool.size
    assert cache.evictable_size() + cache.protected_size() == cache.total_size()
    values = cache.all_values()
    assert values.unique().numel() == values.numel()


def test_match_on_empty_tree():
    cache, _, _, _ = make_cache()
    m = cache.match_prefix([1, 2, 3])
    assert m.device_indices.dtype == torch.int64 and m.device_indices.numel() == 0
    assert m.last_node is cache.root_node
    assert cache.match_prefix([]).last_node is cache.root_node
    assert cache.total_size() == 0 and cache.all_values().numel() == 0


def test_insert_then_exact_partial_and_longer_match():
    cache, _, _, kv_pool = make_cache()
    value = kv_pool.alloc(4)
    assert cache.insert([1, 2, 3, 4], value) == 0
    assert cache.match_prefix([1, 2, 3, 4]).device_indices.tolist() == value.tolist()
    assert cache.match_prefix([1, 2, 3, 4, 5, 6]).device_indices.tolist() == value.tolist()
    assert cache.match_prefix([1, 2, 9]).device_indices.tolist() == value[:2].tolist()
    assert cache.match_prefix([7]).device_indices.numel() == 0
    assert cache.total_size() == 4 and cache.evictable_size() == 4


def test_match_splits_node():
    cache, _, _, kv_pool = make_cache()
    value = kv_pool.alloc(4)
    cache.insert([1, 2, 3, 4], value)
    m = cache.match_prefix([1, 2, 8])
    assert m.last_node.key == [1, 2]
    assert m.last_node.value.tolist() == value[:2].tolist()
    (child,) = m.last_node.children.values()
    assert child.key == [3, 4] and child.parent is m.last_node
    snap = cache.snapshot()
    assert snap["children"][0]["key"] == [1, 2]
    assert snap["children"][0]["children"][0]["key"] == [3, 4]
    assert cache.total_size() == 4 and cache.evictable_size() == 4


def test_insert_returns_already_present_length():
    cache, _, _, kv_pool = make_cache()
    assert insert_fresh(cache, kv_pool, [1, 2, 3]) == 0
    assert insert_fresh(cache, kv_pool, [1, 2, 3, 4, 5]) == 3
    assert insert_fresh(cache, kv_pool, [1, 2, 9]) == 2
    assert insert_fresh(cache, kv_pool, [1, 2]) == 2
    assert cache.total_size() == 6
    assert [c["key"] for c in cache.snapshot()["children"][0]["children"]] == [[3], [9]]
    assert_accounting(cache, kv_pool)


def test_insert_does_not_alias_the_callers_tensor():
    cache, _, _, kv_pool = make_cache()
    value = kv_pool.alloc(3)
    expected = value.tolist()
    cache.insert([1, 2, 3], value)
    value.fill_(0)
    assert cache.all_values().tolist() == expected


def test_lock_prevents_eviction_and_counters_are_exact():
    cache, mgr, _, kv_pool = make_cache()
    insert_fresh(cache, kv_pool, [1, 2, 3, 4])
    insert_fresh(cache, kv_pool, [1, 2, 5])
    node = cache.match_prefix([1, 2, 3, 4]).last_node
    assert cache.inc_lock_ref(node) == -4
    assert cache.protected_size() == 4 and cache.evictable_size() == 1
    assert cache.inc_lock_ref(node) == 0
    assert len(mgr.evict(100)) == 1
    assert cache.total_size() == 4 and cache.evictable_size() == 0
    assert cache.dec_lock_ref(node) == 0
    assert mgr.evict(100) == []
    assert cache.dec_lock_ref(node) == 4
    assert cache.protected_size() == 0 and cache.evictable_size() == 4
    assert len(mgr.evict(100)) == 4
    assert_accounting(cache, kv_pool)
    with pytest.raises(RuntimeError):
        cache.dec_lock_ref(node)


def test_evict_frees_exactly_its_slots():
    cache, mgr, _, kv_pool = make_cache()
    insert_fresh(cache, kv_pool, [1, 2, 3])
    insert_fresh(cache, kv_pool, [4, 5])
    before = kv_pool.available_size()
    evicted = mgr.evict(1)
    assert len(evicted) in (2, 3)
    assert kv_pool.available_size() == before + len(evicted)
    assert set(evicted).isdisjoint(cache.all_values().tolist())
    assert_accounting(cache, kv_pool)


def test_lru_order_and_parent_becomes_candidate():
    cache, mgr, _, kv_pool = make_cache()
    insert_fresh(cache, kv_pool, [1, 2, 3])
    insert_fresh(cache, kv_pool, [1, 2, 4])
    insert_fresh(cache, kv_pool, [7, 8])
    seven = cache.match_prefix([7, 8]).device_indices.tolist()
    leaf4 = cache.match_prefix([1, 2, 4]).last_node.value.tolist()
    leaf3 = cache.match_prefix([1, 2, 3]).last_node.value.tolist()
    shared = cache.match_prefix([1, 2]).device_indices.tolist()
    assert mgr.evict(1) == seven
    assert mgr.evict(1) == leaf4
    assert mgr.evict(2) == leaf3 + shared
    assert cache.total_size() == 0
    assert kv_pool.available_size() == kv_pool.size


def _slots(snapshot: dict, *path: list[int]) -> list[int]:
    """The KV slots of the node reached from the root by these edge keys."""
    node = snapshot
    for key in path:
        node = next(child for child in node["children"] if child["key"] == key)
    return node["value"]


def test_eviction_is_deterministic(monkeypatch):
    """Which slots go depends only on the order of the operations, never on the wall clock: two independent
    caches, one built while the clock stands still and one while it runs backwards, evict the same slots,
    and those are the least recently used ones. (An LRU stamped with the clock would evict in creation
    order in the first and most recent first in the second.)"""
    import time

    def run(clock) -> tuple[dict, list[int], dict]:
        for name in ("time", "monotonic", "perf_counter"):
            monkeypatch.setattr(time, name, lambda: float(clock()))
        for name in ("time_ns", "monotonic_ns", "perf_counter_ns"):
            monkeypatch.setattr(time, name, lambda: int(clock()))
        try:
            cache, mgr, _, kv_pool = make_cache()
            for key in ([1, 2, 3], [1, 2, 4], [5], [6, 7], [1, 9]):
                insert_fresh(cache, kv_pool, key)
            cache.match_prefix([5])  # read last: [5] is the most recently used, though inserted third
            before = cache.snapshot()  # a snapshot reads the tree without touching it
            return before, mgr.evict(4), cache.snapshot()
        finally:
            monkeypatch.undo()

    before, evicted, after = run(lambda: 1_000_000)
    backwards = iter(range(10**9, 0, -1))
    assert run(lambda: next(backwards)) == (before, evicted, after)
    # least recently used first: the leaf [3], the leaf [4], then [6, 7] (inserted after [5], read before it)
    lru = _slots(before, [1], [2], [3]) + _slots(before, [1], [2], [4]) + _slots(before, [6, 7])
    assert evicted == lru
    assert [child["key"] for child in after["children"]] == [[1], [5]]
    assert [child["key"] for child in after["children"][0]["children"]] == [[2], [9]]


def test_evict_returns_each_leafs_slots_and_leaves_the_pool_alone():
    """The tree only gives slots back: freeing them is the CacheManager's job."""
    cache, _, _, kv_pool = make_cache()
    insert_fresh(cache, kv_pool, [1, 2, 3])
    insert_fresh(cache, kv_pool, [1, 2, 4])
    leaf3 = cache.match_prefix([1, 2, 3]).last_node.value.tolist()
    leaf4 = cache.match_prefix([1, 2, 4]).last_node.value.tolist()
    shared = cache.match_prefix([1, 2]).device_indices.tolist()
    free = kv_pool.available_size()
    evicted = cache.evict(3)
    assert [v.tolist() for v in evicted] == [leaf3, leaf4, shared]
    assert kv_pool.available_size() == free and cache.total_size() == 0


def test_reset_returns_every_slot_and_refuses_when_locked():
    cache, _, _, kv_pool = make_cache()
    insert_fresh(cache, kv_pool, [1, 2, 3])
    insert_fresh(cache, kv_pool, [1, 4])
    held = sorted(cache.all_values().tolist())
    node = cache.match_prefix([1, 4]).last_node
    cache.inc_lock_ref(node)
    with pytest.raises(RuntimeError, match="locked"):
        cache.reset()
    cache.dec_lock_ref(node)
    free = kv_pool.available_size()
    assert sorted(cache.reset().tolist()) == held
    assert kv_pool.available_size() == free
    assert cache.snapshot() == {"id": 0, "key": [], "value": [], "lock_ref": 1, "children": []}


def test_pretty_print_mentions_every_node():
    cache, _, _, kv_pool = make_cache()
    insert_fresh(cache, kv_pool, [1, 2, 3])
    insert_fresh(cache, kv_pool, [1, 2, 4])
    text = cache.pretty_print()
    assert "root" in text and "[3]" in text and "[4]" in text and "#tokens: 4" in text


ops = st.lists(
    st.one_of(
        st.tuples(st.just("insert"), st.lists(st.integers(0, 3), min_size=1, max_size=6)),
        st.tuples(st.just("match"), st.lists(st.integers(0, 3), max_size=6)),
        st.tuples(st.just("lock"), st.lists(st.integers(0, 3), max_size=6)),
        st.tuples(st.just("unlock"), st.integers(0, 7)),
        st.tuples(st.just("evict"), st.integers(0, 8)),
        st.tuples(st.just("hold"), st.integers(1, 4)),
        st.tuples(st.just("release"), st.integers(0, 7)),
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops)
def test_random_operations_never_lose_or_double_free_a_slot(operations):
    cache, mgr, _, kv_pool = make_cache(kv_size=48)
    locks: list[TreeNode] = []
    held: list[torch.Tensor] = []
    for op, arg in operations:
        if op == "insert":
            if kv_pool.available_size() < len(arg):
                mgr.evict(len(arg) - kv_pool.available_size())
            if kv_pool.available_size() < len(arg):
                continue
            value = kv_pool.alloc(len(arg))
            n = cache.insert(arg, value)
            assert cache.match_prefix(arg).device_indices[n:].tolist() == value[n:].tolist()
            kv_pool.free(value[:n])
        elif op == "match":
            m = cache.match_prefix(arg)
            assert m.device_indices.numel() <= len(arg)
        elif op == "lock":
            node = cache.match_prefix(arg).last_node
            cache.inc_lock_ref(node)
            locks.append(node)
        elif op == "unlock" and locks:
            cache.dec_lock_ref(locks.pop(arg % len(locks)))
        elif op == "evict":
            before = kv_pool.available_size()
            protected = set(
                torch.cat([cache.match_prefix([]).device_indices] + [_path(n) for n in locks]).tolist()
            )
            evicted = mgr.evict(arg)
            assert kv_pool.available_size() == before + len(evicted)
            assert protected.isdisjoint(evicted)
        elif op == "hold" and kv_pool.available_size() >= arg:
            held.append(kv_pool.alloc(arg))
        elif op == "release" and held:
            kv_pool.free(held.pop(arg % len(held)))
        assert_accounting(cache, kv_pool, held=sum(h.numel() for h in held))
    for node in locks:
        cache.dec_lock_ref(node)
    for h in held:
        kv_pool.free(h)
    mgr.flush_cache()
    assert kv_pool.available_size() == kv_pool.size


def _path(node: TreeNode) -> torch.Tensor:
    values = []
    while node.parent is not None:
        values.append(node.value)
        node = node.parent
    return torch.cat(values) if values else torch.empty(0, dtype=torch.int64)
