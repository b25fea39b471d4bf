"""The cache used with --disable-radix-cache: RadixCache's interface, but nothing is ever shared.

Every KV slot stays owned by its request and is freed when the request finishes. The only state
kept across calls is the request's own prefix_indices, so chunked prefill can resume a prompt.
"""

from __future__ import annotations

import torch

from minisgl.mem_cache.memory_pool import ReqToTokenPool, TokenToKVPool
from minisgl.mem_cache.radix_cache import CacheReq, MatchResult, TreeNode


class ChunkCache:
    """A no-op prefix cache: misses every lookup, holds no slots, evicts nothing."""

    page_size = 1

    def __init__(self, req_to_token_pool: ReqToTokenPool, token_to_kv_pool: TokenToKVPool):
        self.req_to_token_pool = req_to_token_pool
        self.token_to_kv_pool = token_to_kv_pool
        self.device = req_to_token_pool.req_to_token.device
        self.root_node = TreeNode(0, [], self._empty())
        self.root_node.lock_ref = 1

    def _empty(self) -> torch.Tensor:
        return torch.empty(0, dtype=torch.int64, device=self.device)

    def reset(self) -> None:
        """Nothing to drop: the cache holds no slots."""

    def flush_cache(self) -> None:
        """Nothing to drop: the cache holds no slots."""

    def tree_nodes(self) -> list[dict]:
        return [{"id": 0, "parent": None, "key": [], "value": [], "lock_ref": 1}]

    def match_prefix(self, key: list[int]) -> MatchResult:
        return MatchResult(device_indices=self._empty(), last_node=self.root_node)

    def insert(self, key: list[int], value: torch.Tensor) -> int:
        """Stores nothing, so the caller keeps ownership of every slot in `value`."""
        return 0

    def inc_lock_ref(self, node: TreeNode) -> int:
        return 0

    def dec_lock_ref(self, node: TreeNode) -> int:
        return 0

    def evict(self, num_tokens: int) -> list[int]:
        return []

    def cache_finished_req(self, req: CacheReq, free_reason: str = "finished") -> None:
        """Free all the request's KV slots (the last sampled token has none) and its request slot.
        free_reason labels the kv.free event: `retracted` when retract_decode takes it out unfinished."""
        assert req.req_pool_idx is not None
        token_ids = (req.origin_input_ids + req.output_ids)[:-1]
        kv_indices = self.req_to_token_pool.req_to_token[req.req_pool_idx, : len(token_ids)]
        self.token_to_kv_pool.free(kv_indices, reason=free_reason)
        self.req_to_token_pool.free(req.req_pool_idx)
        req.req_pool_idx = None

    def cache_unfinished_req(self, req: CacheReq) -> None:
        """Record the KV computed so far as the request's prefix, so the next chunk starts after it."""
        assert req.req_pool_idx is not None
        row = self.req_to_token_pool.req_to_token[req.req_pool_idx]
        req.prefix_indices = row[: len(req.fill_ids)].clone()

    def evictable_size(self) -> int:
        return 0

    def protected_size(self) -> int:
        return 0

    def total_size(self) -> int:
        return 0

    def all_values(self) -> torch.Tensor:
        return self._empty()

    def snapshot(self) -> dict:
        return {"id": 0, "key": [], "value": [], "lock_ref": 1, "children": []}

    def pretty_print(self) -> str:
        return "[0] root lock=1 (chunk cache: nothing is cached)"
