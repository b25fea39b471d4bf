"""CacheManager: moves KV slots between the pool, the requests and the prefix cache.

Three parts share the KV slots, and each does one job:
- TokenToKVPool (memory_pool.py) hands out free slots and takes them back;
- a request's row in ReqToTokenPool lists the slots of its tokens, in order;
- the prefix cache (RadixCache or ChunkCache) holds the slots other requests may reuse.
The CacheManager is the only code that moves a slot from one to another. A slot has one owner at a
time: the pool (free), a request (in its row, not in the tree), or the tree.

Caller contract for a request `req` (the scheduler keeps it):
  1. On admission: `m = tree_cache.match_prefix(req.origin_input_ids)`, then
     `req.prefix_indices, req.last_node = m.device_indices, m.last_node` and
     `tree_cache.inc_lock_ref(m.last_node)`. The locked path is not evictable while `req` runs, and
     the first `len(req.prefix_indices)` columns of its `req_to_token` row hold those slots.
  2. After each prefill chunk: `cache_unfinished_req(req)` (req keeps its request slot).
  3. When it finishes: `cache_finished_req(req)`. This frees the request slot, unlocks
     `req.last_node` and sets `req.req_pool_idx = None`. The last sampled token must have no KV
     slot allocated in the row (it was never run through the model).

What it did is kept, when asked, in `journal`: the scheduler's tracing reads it and turns it into
kv.alloc, kv.free, cache.inserted and cache.evicted events. Nothing here knows about tracing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import torch

from minisgl.mem_cache.base_prefix_cache import BasePrefixCache
from minisgl.mem_cache.memory_pool import ReqToTokenPool, TokenToKVPool


class CacheReq(Protocol):
    """The fields of a request that the CacheManager reads and writes (duck-typed; any object will do)."""

    rid: str
    origin_input_ids: list[int]
    output_ids: list[int]
    fill_ids: list[int]
    req_pool_idx: int | None
    prefix_indices: torch.Tensor
    last_node: Any


@dataclass
class CacheOp:
    """One move of KV slots, as the CacheManager made it."""

    # "alloc": pool -> no owner yet; "free": -> pool; "insert": request -> tree; "evict": tree -> pool
    kind: str
    slots: torch.Tensor
    reason: str | None = None  # free: duplicate, finished, retracted, evicted or flush
    rid: str | None = None  # insert: the request whose KV the tree took


class CacheManager:
    def __init__(self, tree_cache: BasePrefixCache, req_to_token_pool: ReqToTokenPool,
                 token_to_kv_pool: TokenToKVPool):
        self.tree_cache = tree_cache
        self.req_to_token_pool = req_to_token_pool
        self.token_to_kv_pool = token_to_kv_pool
        # every CacheOp in order, while someone reads them (None: keep nothing)
        self.journal: list[CacheOp] | None = None

    # ---- allocation and eviction -----------------------------------------------------------------
    def alloc_token_slots(self, num_tokens: int) -> torch.Tensor:
        """Take KV slots, evicting unreferenced cache entries first if the free list is short."""
        short = num_tokens - self.token_to_kv_pool.available_size()
        if short > 0:
            self.evict(short)
        slots = self.token_to_kv_pool.alloc(num_tokens)
        self._note(CacheOp("alloc", slots))
        return slots

    def evict(self, num_tokens: int) -> list[int]:
        """Evict at least num_tokens slots from the prefix cache (if that many are evictable) and free
        them."""
        values = self.tree_cache.evict(num_tokens)
        for value in values:
            self._free(value, "evicted")
        if not values:
            return []
        evicted = torch.cat(values)
        self._note(CacheOp("evict", evicted))
        return evicted.tolist()

    def flush_cache(self) -> None:
        """Empty the prefix cache and give its slots back (refused while a running request locks any)."""
        self._free(self.tree_cache.reset(), "flush")

    # ---- request lifecycle -----------------------------------------------------------------------
    def cache_finished_req(self, req: CacheReq, free_reason: str = "finished") -> None:
        """Finished or retracted: the tree takes its KV (or, with no tree, the pool gets it back).

        Its request slot is freed and its prefix unlocked. free_reason labels the freed slots when
        nothing is shared: `retracted` when retract_decode takes a request out unfinished.
        """
        assert req.req_pool_idx is not None
        token_ids = (req.origin_input_ids + req.output_ids)[:-1]
        kv_indices = self.req_to_token_pool.req_to_token[req.req_pool_idx, : len(token_ids)]
        if self.tree_cache.disable:
            self._free(kv_indices, free_reason)
        else:
            new_prefix_len = self.tree_cache.insert(token_ids, kv_indices)
            # the tree already held [len(prefix), new_prefix_len): another request cached them meanwhile
            self._free(kv_indices[len(req.prefix_indices) : new_prefix_len], "duplicate")
            self._note(CacheOp("insert", kv_indices[new_prefix_len:], rid=req.rid))
        self.req_to_token_pool.free(req.req_pool_idx)
        self.tree_cache.dec_lock_ref(req.last_node)
        req.req_pool_idx = None

    def cache_unfinished_req(self, req: CacheReq) -> None:
        """Cache the KV computed so far (a prefill chunk, or a whole prompt) and keep the request running.

        With a tree, the request's row is re-pointed at the tree's slots and its lock moves to the new,
        deeper node; without one, the computed part simply becomes the request's own prefix.
        """
        assert req.req_pool_idx is not None
        token_ids = req.fill_ids
        row = self.req_to_token_pool.req_to_token[req.req_pool_idx]
        kv_indices = row[: len(token_ids)].clone()
        if self.tree_cache.disable:
            req.prefix_indices = kv_indices
            return
        old_prefix_len = len(req.prefix_indices)
        new_prefix_len = self.tree_cache.insert(token_ids, kv_indices)
        self._free(kv_indices[old_prefix_len:new_prefix_len], "duplicate")
        self._note(CacheOp("insert", kv_indices[new_prefix_len:], rid=req.rid))

        match = self.tree_cache.match_prefix(token_ids)
        assert len(match.device_indices) == len(token_ids), "inserted tokens must all match"
        row[old_prefix_len : len(token_ids)] = match.device_indices[old_prefix_len:]
        self.tree_cache.dec_lock_ref(req.last_node)
        self.tree_cache.inc_lock_ref(match.last_node)
        req.prefix_indices, req.last_node = match.device_indices, match.last_node

    def free_slots(self, slots: torch.Tensor, reason: str) -> None:
        """Give back slots no request row or tree keeps (the overlap loop's rows that ran past a finish)."""
        self._free(slots, reason)

    def free_rejected_draft_slots(self, slots: torch.Tensor) -> None:
        """Speculative decoding: KV written by draft rows the model did not accept goes back to the pool."""
        self._free(slots, "rejected")

    # ---- helpers ---------------------------------------------------------------------------------
    def _free(self, slots: torch.Tensor, reason: str) -> None:
        if slots.numel() == 0:
            return
        self.token_to_kv_pool.free(slots)
        self._note(CacheOp("free", slots, reason=reason))

    def _note(self, op: CacheOp) -> None:
        if self.journal is not None:
            op.slots = op.slots.to(torch.int64).cpu().flatten().clone()  # a row may be rewritten later
            self.journal.append(op)
