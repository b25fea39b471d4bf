"""Unit tests of the radix_cache lab: your RadixCache under `minisgl lab test radix_cache`, else the
engine's."""

import pytest
import torch

from minisgl.labs.testing import component

RadixCache = component("radix_cache").RadixCache


def slots(*xs):
    return torch.tensor(xs, dtype=torch.int64)


def test_a_miss_then_a_full_hit():
    c = RadixCache()
    assert c.match_prefix([1, 2, 3]).device_indices.tolist() == []
    assert c.insert([1, 2, 3], slots(10, 11, 12)) == 0
    m = c.match_prefix([1, 2, 3, 4])
    assert m.device_indices.tolist() == [10, 11, 12]
    assert m.last_node.key == [1, 2, 3]


def test_a_partial_match_splits_the_node():
    c = RadixCache()
    c.insert([1, 2, 3, 4], slots(10, 11, 12, 13))
    m = c.match_prefix([1, 2, 9])
    assert m.device_indices.tolist() == [10, 11]
    assert m.last_node.key == [1, 2]
    assert [ch.key for ch in m.last_node.children.values()] == [[3, 4]]
    assert c.total_size() == 4


def test_insert_returns_what_was_cached_and_adds_one_leaf():
    c = RadixCache()
    c.insert([1, 2, 3], slots(10, 11, 12))
    assert c.insert([1, 2, 5, 6], slots(20, 21, 22, 23)) == 2
    assert c.match_prefix([1, 2, 5, 6]).device_indices.tolist() == [10, 11, 22, 23]
    assert c.evictable_size() == 5


def test_lock_counts_move_tokens_between_evictable_and_protected():
    c = RadixCache()
    c.insert([1, 2, 3], slots(10, 11, 12))
    node = c.match_prefix([1, 2, 3]).last_node
    assert c.inc_lock_ref(node) == -3
    assert (c.evictable_size(), c.protected_size()) == (0, 3)
    assert c.inc_lock_ref(node) == 0  # a second lock changes nothing
    assert c.dec_lock_ref(node) == 0
    assert c.dec_lock_ref(node) == 3
    assert (c.evictable_size(), c.protected_size()) == (3, 0)
    with pytest.raises(RuntimeError):
        c.dec_lock_ref(node)


def test_a_split_keeps_the_lock_on_both_halves():
    c = RadixCache()
    c.insert([1, 2, 3, 4], slots(10, 11, 12, 13))
    c.inc_lock_ref(c.match_prefix([1, 2, 3, 4]).last_node)
    upper = c.match_prefix([1, 2]).last_node
    assert upper.lock_ref == 1 and next(iter(upper.children.values())).lock_ref == 1
    assert c.protected_size() == 4


def test_evict_takes_the_least_recently_used_unlocked_leaves_first():
    c = RadixCache()
    c.insert([1, 2], slots(10, 11))
    c.insert([5, 6], slots(20, 21))
    c.insert([8], slots(30))
    c.match_prefix([1, 2])  # now the most recently used
    c.inc_lock_ref(c.match_prefix([8]).last_node)
    out = c.evict(1)
    assert [t.tolist() for t in out] == [[20, 21]]  # whole leaves, LRU first; the locked one stays
    assert c.evict(10) and c.total_size() == 1


def test_evict_climbs_to_a_parent_left_without_children():
    c = RadixCache()
    c.insert([1, 2, 3], slots(10, 11, 12))
    c.insert([1, 2, 4], slots(10, 11, 13))
    out = c.evict(4)
    assert sorted(x for t in out for x in t.tolist()) == [10, 11, 12, 13]
    assert c.total_size() == 0 and c.evictable_size() == 0


def test_reset_is_refused_while_locked():
    c = RadixCache()
    c.insert([1], slots(10))
    node = c.match_prefix([1]).last_node
    c.inc_lock_ref(node)
    with pytest.raises(RuntimeError):
        c.reset()
    c.dec_lock_ref(node)
    assert c.reset().tolist() == [10]
