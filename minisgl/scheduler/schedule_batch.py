"""ScheduleBatch: the scheduler's plan for one round — which requests, which rows, which KV slots.

It lives on the CPU. TpModelWorker turns it into a ForwardBatch (the model's inputs) at run time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from minisgl.mem_cache.cache_manager import CacheManager
from minisgl.mem_cache.memory_pool import KVCacheExhausted, ReqToTokenPool, TokenToKVPool
from minisgl.model_executor.forward_batch_info import ForwardMode
from minisgl.scheduler.req import Req
from minisgl.speculative.spec_info import NgramVerifyInput


@dataclass
class ScheduleBatch:
    reqs: list[Req]
    req_to_token_pool: ReqToTokenPool
    token_to_kv_pool: TokenToKVPool
    cache_manager: CacheManager  # takes KV slots (evicting if short) and caches or frees a request's KV
    forward_mode: ForwardMode = ForwardMode.IDLE
    input_ids: list[int] = field(default_factory=list)  # staged on the CPU; the worker makes the tensor
    req_pool_indices: list[int] = field(default_factory=list)
    seq_lens: list[int] = field(default_factory=list)
    prefix_lens: list[int] = field(default_factory=list)
    extend_lens: list[int] = field(default_factory=list)
    out_cache_loc: torch.Tensor = field(default_factory=lambda: torch.empty(0, dtype=torch.int64))
    decoding_reqs: list[Req] = field(default_factory=list)  # MIXED: the running requests' decode rows
    chunked_req: Req | None = None  # EXTEND/MIXED: the request whose chunk this round is not its prompt's end
    # overlap: each request's output length at launch (seeds sampling)
    sampling_steps: list[int] | None = None
    spec_info: NgramVerifyInput | None = None  # TARGET_VERIFY: each request's draft tokens

    @classmethod
    def init_new(cls, reqs: list[Req], req_to_token_pool, token_to_kv_pool, cache_manager) -> ScheduleBatch:
        return cls(list(reqs), req_to_token_pool, token_to_kv_pool, cache_manager)

    def is_empty(self) -> bool:
        return not self.reqs

    def batch_size(self) -> int:
        return len(self.reqs)

    # ---- memory -----------------------------------------------------------------------------------
    def alloc_token_slots(self, num_tokens: int) -> torch.Tensor:
        """Take KV slots, evicting unreferenced radix-cache leaves first if the free list is short."""
        return self.cache_manager.alloc_token_slots(num_tokens)

    def check_decode_mem(self) -> bool:
        """Is there a KV slot (free or evictable) for every request's next token?"""
        room = self.token_to_kv_pool.available_size() + self.cache_manager.tree_cache.evictable_size()
        return room >= len(self.reqs)

    # ---- EXTEND -----------------------------------------------------------------------------------
    def prepare_for_extend(self) -> None:
        """Give every request its request slot and this round's KV slots, and write req_to_token."""
        self.forward_mode = ForwardMode.EXTEND
        for req in self.reqs:
            if req.req_pool_idx is None:
                (req.req_pool_idx,) = self.req_to_token_pool.alloc(1)
        self.prefix_lens = [len(r.prefix_indices) for r in self.reqs]
        self.extend_lens = [r.extend_input_len for r in self.reqs]
        self.seq_lens = [p + e for p, e in zip(self.prefix_lens, self.extend_lens)]
        self.req_pool_indices = [r.req_pool_idx for r in self.reqs]
        self.input_ids = [t for r, p in zip(self.reqs, self.prefix_lens) for t in r.fill_ids[p:]]
        self.out_cache_loc = self.alloc_token_slots(sum(self.extend_lens))
        row_of = self.req_to_token_pool.req_to_token
        start = 0
        for req, prefix, seq in zip(self.reqs, self.prefix_lens, self.seq_lens):
            row_of[req.req_pool_idx, :prefix] = req.prefix_indices
            row_of[req.req_pool_idx, prefix:seq] = self.out_cache_loc[start : start + seq - prefix]
            start += seq - prefix

    def mix_with_running(self, running_batch: ScheduleBatch) -> None:
        """Append the running requests' decode rows to this prefill as 1-token extends (MIXED)."""
        # running_batch.prepare_for_decode() already took their slots and wrote req_to_token
        self.forward_mode = ForwardMode.MIXED
        for req in running_batch.reqs:
            req.fill_ids = req.origin_input_ids + req.output_ids
            req.extend_input_len = 1
        self.input_ids += running_batch.input_ids
        self.out_cache_loc = torch.cat([self.out_cache_loc, running_batch.out_cache_loc])
        self.prefix_lens += [s - 1 for s in running_batch.seq_lens]
        self.extend_lens += [1] * running_batch.batch_size()
        self.seq_lens += running_batch.seq_lens
        self.req_pool_indices += running_batch.req_pool_indices
        self.decoding_reqs = list(running_batch.reqs)
        self.reqs += running_batch.reqs

    # ---- DECODE -----------------------------------------------------------------------------------
    def prepare_for_decode(self) -> None:
        """Each request feeds its newest token: one row, one new KV slot, at position seq_len - 1."""
        self.forward_mode = ForwardMode.DECODE
        self.input_ids = [r.last_token_id() for r in self.reqs]
        self.seq_lens = [r.seqlen for r in self.reqs]
        self.req_pool_indices = [r.req_pool_idx for r in self.reqs]
        self.prefix_lens, self.extend_lens = [], []
        self.out_cache_loc = self.alloc_token_slots(len(self.reqs))
        self.req_to_token_pool.req_to_token[self.req_pool_indices, [s - 1 for s in self.seq_lens]] = (
            self.out_cache_loc)

    def retract_decode(self) -> list[Req]:
        """Take requests out until the rest have room for their next token; return those taken.

        Victims: fewest output tokens first, then the longest prompt (it frees the most), then rid —
        a fixed order, so the same workload always retracts the same requests.
        """
        order = sorted(self.reqs, key=lambda r: (len(r.output_ids), -len(r.origin_input_ids), r.rid))
        retracted: list[Req] = []
        while not self.check_decode_mem():
            if len(self.reqs) == 1:
                raise KVCacheExhausted("KV cache too small for a single request's next token")
            victim = order.pop(0)
            self.reqs.remove(victim)
            self.free_in_flight_rows(victim)
            # a radix tree keeps its computed KV (evictable), so a resume may reuse it;
            # without one it is freed
            self.cache_manager.cache_finished_req(victim, free_reason="retracted")
            victim.reset_for_retract()
            retracted.append(victim)
        return retracted

    def free_in_flight_rows(self, req: Req) -> None:
        """Overlap loop: rows of a launched round whose token is still being sampled lie past the KV that
        cache_finished_req takes; free their slots and forget those tokens (a resumed request recomputes
        them)."""
        if not req.future_token_ids:
            return
        start = len(req.origin_input_ids) + len(req.output_ids) - 1
        row = self.req_to_token_pool.req_to_token[req.req_pool_idx]
        self.cache_manager.free_slots(row[start : start + len(req.future_token_ids)].clone(), "retracted")
        req.future_token_ids.clear()

    def copy(self) -> ScheduleBatch:
        """What a launched round needs (overlap loop): the scheduler goes on changing this batch meanwhile."""
        return ScheduleBatch(
            list(self.reqs), self.req_to_token_pool, self.token_to_kv_pool, self.cache_manager,
            self.forward_mode, list(self.input_ids), list(self.req_pool_indices), list(self.seq_lens),
            list(self.prefix_lens), list(self.extend_lens), self.out_cache_loc, list(self.decoding_reqs),
            self.chunked_req,
            [len(r.output_ids) + len(r.future_token_ids) for r in self.reqs])

    def last_row_slot(self, i: int) -> torch.Tensor:
        """The KV slot of the i-th request's last row (its sampled row) this round."""
        rows = self.extend_lens if self.forward_mode.is_extend() else [1] * len(self.reqs)
        end = sum(rows[: i + 1])
        return self.out_cache_loc[end - 1 : end]

    # ---- membership -------------------------------------------------------------------------------
    def filter_batch(self, chunked_req_to_exclude: Req | None = None) -> list[Req]:
        """Drop finished requests (and the one still being chunked); returns the dropped ones."""
        dropped = [r for r in self.reqs if r.finished() or r is chunked_req_to_exclude]
        self.reqs = [r for r in self.reqs if not r.finished() and r is not chunked_req_to_exclude]
        return dropped

    def merge_batch(self, other: ScheduleBatch) -> None:
        self.reqs += other.reqs
