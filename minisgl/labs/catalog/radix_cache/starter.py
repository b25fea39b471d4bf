"""Lab radix_cache (your file). RadixCache: a radix tree over token ids whose nodes hold the KV slots of those
tokens (page size 1).

Requests that share a prompt prefix reuse the same KV slots instead of recomputing them. Every
edge of the tree holds a run of token ids (`key`) and the KV slots computed for them (`value`).
Besides keys and values the tree keeps two things: a lock count per node (a running request locks
the path to its cached prefix, so it cannot be evicted) and a logical clock for LRU eviction.

That is all it does. It never allocates or frees a KV slot and never reads a request: `insert`
returns how much was cached already and `evict` returns the slots it dropped, and the CacheManager
(cache_manager.py) frees them and keeps each request's `req_to_token` row right. The interface it
implements, and the ownership rule for `insert`, are in base_prefix_cache.py.

Your class inherits everything around the six methods below from the engine's RadixCache, so nothing here
is a copy that could drift from it. What you can use:

- `TreeNode(id, key, value)`: `children` (first token -> child), `parent`, `key`, `value` (an int64
  tensor of slots), `lock_ref`, `last_access_time`; nodes compare by (last_access_time, id).
- `_key_match(key0, key1)`: the length of the common prefix of two token lists.
- `self.root_node` (locked once, never evicted), `self.evictable_size_`, `self.protected_size_`.
- `self._new_node(key, value)`: a node with the next id (create nodes only this way: the trace compares
  ids); `self._tick()`: advance the clock and return the new time.
- `insert(key, value)` checks its arguments and calls your `_insert_helper` with the time of one tick;
  `_delete_leaf(node)` unlinks a leaf, takes its tokens off evictable_size_ and returns its parent;
  `_collect_leaves()` lists the leaves.
"""

from __future__ import annotations

import heapq  # noqa: F401  (evict uses it)

import torch

from minisgl.mem_cache.base_prefix_cache import MatchResult  # noqa: F401  (match_prefix returns one)
from minisgl.mem_cache.radix_cache import RadixCache as EngineRadixCache
from minisgl.mem_cache.radix_cache import TreeNode, _key_match  # noqa: F401  (yours to use)


class RadixCache(EngineRadixCache):
    """Prefix cache shared by all requests; evicts unlocked leaves, least recently used first."""

    def match_prefix(self, key: list[int]) -> MatchResult:
        """Longest cached prefix of `key`; splits a node so the match always ends on a node boundary.

        Walk down from the root while the next token has a child. At each child, count how many of its
        tokens match (`_key_match`). A partial match splits the child (`_split_node`) so the match ends on a
        node boundary. Collect each matched node's `value` and concatenate them. Every node you visit (the
        root included) gets `last_access_time = now`, with ONE `self._tick()` per call.
        """
        raise NotImplementedError("TODO: match_prefix")

    def _insert_helper(self, node: TreeNode, key: list[int], value: torch.Tensor, now: int) -> int:
        """Insert key -> value below `node`; returns how many leading tokens were there already.

        Walk down like match_prefix (splitting on a partial match, stamping last_access_time = now),
        adding up how many tokens were already there. Whatever is left of `key` becomes one new leaf
        (`self._new_node`) under the last node, and counts as evictable.
        """
        raise NotImplementedError("TODO: _insert_helper")

    def _split_node(self, child: TreeNode, split_len: int) -> TreeNode:
        """Cut `child` after split_len tokens; the new upper node inherits its lock count and parent.

        The new upper node takes the first split_len tokens and slots, the child keeps the rest;
        the upper node takes the child's place under its parent and inherits lock_ref and last_access_time.
        """
        raise NotImplementedError("TODO: _split_node")

    def inc_lock_ref(self, node: TreeNode) -> int:
        """Protect the path root -> node from eviction; returns the change in evictable_size.

        From node up to (not including) the root: a node going from 0 to 1 locks moves its tokens
        from evictable to protected.
        """
        raise NotImplementedError("TODO: inc_lock_ref")

    def dec_lock_ref(self, node: TreeNode) -> int:
        """Undo one inc_lock_ref(node); returns the change in evictable_size.

        The mirror of inc_lock_ref; a node already at 0 is a bug in the caller: raise RuntimeError.
        """
        raise NotImplementedError("TODO: dec_lock_ref")

    def evict(self, num_tokens: int) -> list[torch.Tensor]:
        """Drop unlocked leaves, least recently used first, until num_tokens slots came out (or none is left).

        Returns each dropped leaf's slots in the order dropped; the caller frees them. A parent left
        childless and unlocked becomes a leaf and a candidate in turn.

        Use a heap of the unlocked leaves (TreeNode orders by last_access_time, then id) and
        `_delete_leaf`; push a parent that became an unlocked, childless non-root node.
        """
        raise NotImplementedError("TODO: evict")
