"""BasePrefixCache: what a prefix cache must answer, whatever it is built from.

A prefix cache maps token ids to the KV slots already computed for them. It is a data structure and
nothing more: it never allocates or frees a KV slot, never touches `req_to_token`, and emits nothing.
Each method returns what it did, so its caller (the CacheManager) can give slots back to the pool and
tell the trace. Two caches implement it:

- RadixCache (radix_cache.py): a radix tree; requests that share a prompt prefix share its KV slots.
- ChunkCache (chunk_cache.py): shares nothing (--disable-radix-cache); every lookup misses.

Ownership of a slot moves with `insert` and `evict`: `insert(key, value)` returns how many leading
tokens were cached already; the cache takes `value[that:]` and the caller still owns (and frees) its
own copies `value[:that]`. `evict` hands slots back: the caller frees them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import torch


@dataclass
class MatchResult:
    """The cached prefix of a key: its KV slots in order, and the deepest node it ends on."""

    device_indices: torch.Tensor
    last_node: Any


class BasePrefixCache(ABC):
    # True for a cache that shares nothing: the CacheManager then frees a finished request's slots
    # instead of inserting them (SGLang's RadixCache has the same flag for the same job)
    disable = False
    page_size = 1
    root_node: Any

    # ---- lookup and insertion --------------------------------------------------------------------
    @abstractmethod
    def match_prefix(self, key: list[int]) -> MatchResult:
        """Longest cached prefix of `key` (it may split a node so the match ends on a node boundary)."""

    @abstractmethod
    def insert(self, key: list[int], value: torch.Tensor) -> int:
        """Add key -> value; returns how many leading tokens were already cached."""

    # ---- locking and eviction --------------------------------------------------------------------
    @abstractmethod
    def inc_lock_ref(self, node: Any) -> int:
        """Protect the path root -> node from eviction; returns the change in evictable_size."""

    @abstractmethod
    def dec_lock_ref(self, node: Any) -> int:
        """Undo one inc_lock_ref(node); returns the change in evictable_size."""

    @abstractmethod
    def evict(self, num_tokens: int) -> list[torch.Tensor]:
        """Drop unlocked entries until at least num_tokens slots came out (if that many are evictable).

        Returns the KV slots of each dropped node, in the order they were dropped: the caller frees them.
        """

    @abstractmethod
    def reset(self) -> torch.Tensor:
        """Drop everything (refused while anything is locked); returns the slots it held, for the caller to
        free."""

    # ---- sizes and inspection --------------------------------------------------------------------
    @abstractmethod
    def evictable_size(self) -> int: ...

    @abstractmethod
    def protected_size(self) -> int: ...

    @abstractmethod
    def total_size(self) -> int: ...

    @abstractmethod
    def all_values(self) -> torch.Tensor:
        """Every KV slot the cache holds."""

    @abstractmethod
    def tree_nodes(self) -> list[dict]:
        """Every node as a flat record (the `cache.tree` trace event): id, parent, key, value, lock_ref, and
        for a cache that evicts by recency its LRU stamp, last_access_time."""

    @abstractmethod
    def snapshot(self) -> dict:
        """The cache as nested plain dicts (children ordered by first token) for tests and trace diffs."""

    @abstractmethod
    def pretty_print(self) -> str: ...
