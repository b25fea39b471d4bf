"""ChunkCache: the prefix cache used with --disable-radix-cache. It shares nothing.

Every lookup misses and nothing is ever stored, so every KV slot stays with its request and the
CacheManager frees it when the request finishes (`disable` tells it so). A chunked prompt still
resumes where it stopped: the CacheManager keeps the computed part in the request's own
`prefix_indices`, not here.
"""

from __future__ import annotations

import torch

from minisgl.mem_cache.base_prefix_cache import BasePrefixCache, MatchResult
from minisgl.mem_cache.radix_cache import TreeNode


class ChunkCache(BasePrefixCache):
    """A prefix cache that misses every lookup, holds no slots and evicts nothing."""

    disable = True

    def __init__(self, device: str | torch.device = "cpu"):
        self.device = torch.device(device)
        self.root_node = TreeNode(0, [], self._empty())
        self.root_node.lock_ref = 1

    def _empty(self) -> torch.Tensor:
        return torch.empty(0, dtype=torch.int64, device=self.device)

    def match_prefix(self, key: list[int]) -> MatchResult:
        return MatchResult(device_indices=self._empty(), last_node=self.root_node)

    def insert(self, key: list[int], value: torch.Tensor) -> int:
        """Stores nothing, so the caller keeps ownership of every slot in `value`."""
        return 0

    def inc_lock_ref(self, node: TreeNode) -> int:
        return 0

    def dec_lock_ref(self, node: TreeNode) -> int:
        return 0

    def evict(self, num_tokens: int) -> list[torch.Tensor]:
        return []

    def reset(self) -> torch.Tensor:
        return self._empty()

    def evictable_size(self) -> int:
        return 0

    def protected_size(self) -> int:
        return 0

    def total_size(self) -> int:
        return 0

    def all_values(self) -> torch.Tensor:
        return self._empty()

    def tree_nodes(self) -> list[dict]:
        return [{"id": 0, "parent": None, "key": [], "value": [], "lock_ref": 1}]

    def snapshot(self) -> dict:
        return {"id": 0, "key": [], "value": [], "lock_ref": 1, "children": []}

    def pretty_print(self) -> str:
        return "[0] root lock=1 (chunk cache: nothing is cached)"
