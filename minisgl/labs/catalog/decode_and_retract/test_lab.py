"""Unit tests of the decode_and_retract lab: your ScheduleBatch.prepare_for_decode and retract_decode under
`minisgl lab test decode_and_retract`, else the engine's.

Real pools, a real RadixCache (or ChunkCache) and CacheManager, real Req objects; no model. `running()` puts
a request in the state a decode round finds it in, through the same pool and cache calls the engine makes.
"""

import pytest
import torch

from minisgl.labs.testing import component
from minisgl.mem_cache.cache_manager import CacheManager
from minisgl.mem_cache.chunk_cache import ChunkCache
from minisgl.mem_cache.memory_pool import KVCacheExhausted, ReqToTokenPool, TokenToKVPool
from minisgl.mem_cache.radix_cache import RadixCache
from minisgl.model_executor.forward_batch_info import ForwardMode
from minisgl.sampling.sampling_params import SamplingParams
from minisgl.scheduler.req import Req
from minisgl.scheduler.schedule_batch import ScheduleBatch

component("decode_and_retract")  # installs your two methods on ScheduleBatch (under `minisgl lab test`)


def engine(kv_slots=64, radix=True) -> CacheManager:
    r2t = ReqToTokenPool(8, 64)
    kv = TokenToKVPool(kv_slots, num_layers=1, num_kv_heads=1, head_dim=1, dtype=torch.float32)
    return CacheManager(RadixCache() if radix else ChunkCache(), r2t, kv)


def running(cm: CacheManager, rid: str, prompt: list[int], outputs: list[int]) -> Req:
    """Admitted, prefilled, then decoded until it has `outputs`: every token has KV but the newest one."""
    req = Req(rid, list(prompt), SamplingParams(max_new_tokens=32, ignore_eos=True), eos_token_ids=set())
    req.init_next_round_input(cm.tree_cache)  # admission: match and lock the cached prefix
    cm.tree_cache.inc_lock_ref(req.last_node)
    (req.req_pool_idx,) = cm.req_to_token_pool.alloc(1)  # prefill (what prepare_for_extend does)
    row, p = cm.req_to_token_pool.req_to_token[req.req_pool_idx], len(req.prefix_indices)
    row[:p] = req.prefix_indices
    row[p : len(prompt)] = cm.alloc_token_slots(len(prompt) - p)
    req.output_ids.append(outputs[0])
    cm.cache_unfinished_req(req)  # the prompt enters the radix tree, locked by this request
    for token in outputs[1:]:  # each decode round: the fed token gets a slot, then a token is sampled
        row[req.seqlen - 1] = cm.alloc_token_slots(1)
        req.output_ids.append(token)
    return req


def batch_of(cm: CacheManager, reqs) -> ScheduleBatch:
    return ScheduleBatch.init_new(reqs, cm.req_to_token_pool, cm.token_to_kv_pool, cm)


def row(cm: CacheManager, req: Req, n: int) -> list[int]:
    return cm.req_to_token_pool.req_to_token[req.req_pool_idx, :n].tolist()


# ---- prepare_for_decode ----------------------------------------------------------------------------------
def test_one_row_per_request_fed_with_its_newest_token():
    cm = engine()
    a = running(cm, "A", [10, 11, 12, 13], [20])  # KV slots 1-4
    b = running(cm, "B", [30, 31, 32], [40, 41])  # KV slots 5-7, then 8 for the token 40
    batch = batch_of(cm, [a, b])
    batch.prepare_for_decode()
    assert batch.forward_mode == ForwardMode.DECODE
    assert batch.input_ids == [20, 41]
    assert batch.seq_lens == [5, 5]  # prompt + outputs, the token fed now included
    assert batch.req_pool_indices == [0, 1]
    assert (batch.prefix_lens, batch.extend_lens) == ([], []), (
        "a DECODE batch has no prefix or extend lengths")
    assert batch.out_cache_loc.tolist() == [9, 10]
    assert row(cm, a, 5) == [1, 2, 3, 4, 9]  # the new slot at position seq_len - 1
    assert row(cm, b, 5) == [5, 6, 7, 8, 10]


def test_seq_lens_grow_by_one_each_round_and_the_slots_follow():
    cm = engine()
    a = running(cm, "A", [10, 11, 12, 13], [20])
    batch = batch_of(cm, [a])
    batch.prepare_for_decode()
    assert (batch.seq_lens, batch.out_cache_loc.tolist()) == ([5], [5])
    a.output_ids.append(21)  # what the round sampled
    batch.prepare_for_decode()
    assert (batch.input_ids, batch.seq_lens, batch.out_cache_loc.tolist()) == ([21], [6], [6])
    assert row(cm, a, 6) == [1, 2, 3, 4, 5, 6]


def test_the_round_takes_its_kv_slots_in_one_allocation():
    cm = engine()
    reqs = [running(cm, "A", [10, 11, 12, 13], [20]), running(cm, "B", [30, 31, 32], [40, 41])]
    cm.journal = []  # what the trace turns into kv.alloc events, one per alloc_token_slots call
    batch_of(cm, reqs).prepare_for_decode()
    allocs = [op.slots.tolist() for op in cm.journal if op.kind == "alloc"]
    assert allocs == [[9, 10]], "one self.alloc_token_slots(len(self.reqs)) per round"


def test_a_full_pool_evicts_the_radix_cache_for_the_decode_rows():
    cm = engine(kv_slots=7)
    r0 = running(cm, "R0", [50, 51, 52], [60])  # KV slots 1-3 ...
    cm.cache_finished_req(r0)  # ... stay in the tree, unlocked, when it finishes
    a = running(cm, "A", [10, 11, 12, 13], [20])  # KV slots 4-7: the free list is empty
    batch = batch_of(cm, [a])
    assert batch.check_decode_mem()  # one evictable slot is enough
    batch.prepare_for_decode()
    assert batch.out_cache_loc.tolist() == [1], "take the slots with self.alloc_token_slots (it evicts)"
    assert cm.tree_cache.total_size() == 4  # R0's leaf is gone; A's prompt stays


# ---- retract_decode --------------------------------------------------------------------------------------
def test_the_request_with_fewest_output_tokens_is_retracted_and_its_kv_cached():
    cm = engine(kv_slots=11)
    a = running(cm, "A", [10, 11, 12, 13], [20, 21, 22])  # 6 slots
    b = running(cm, "B", [30, 31, 32, 33], [40, 41])  # 5 slots: the pool is full, nothing is evictable
    batch = batch_of(cm, [a, b])
    assert not batch.check_decode_mem()
    b_kv = row(cm, b, 5)
    assert batch.retract_decode() == [b]
    assert batch.reqs == [a]
    assert b.req_pool_idx is None and b.is_retracted and b.output_ids == [40, 41]
    assert cm.req_to_token_pool.available_size() == 7  # B's request slot came back
    assert cm.tree_cache.evictable_size() == 5  # B's computed KV waits in the tree, unlocked
    b.init_next_round_input(cm.tree_cache)  # a later admission finds it again
    assert b.prefix_indices.tolist() == b_kv


def test_ties_go_to_the_longest_prompt_then_to_the_rid():
    cm = engine(kv_slots=10)
    a = running(cm, "A", [10, 11, 12], [20, 21])  # 4 slots
    b = running(cm, "B", [30, 31, 32, 33, 34], [40, 41])  # 6 slots
    assert batch_of(cm, [a, b]).retract_decode() == [b], "same outputs: the longer prompt frees more"

    cm = engine(kv_slots=10)
    b = running(cm, "B", [30, 31, 32, 33], [40, 41])
    a = running(cm, "A", [10, 11, 12, 13], [20, 21])
    batch = batch_of(cm, [b, a])
    assert batch.retract_decode() == [a], "same outputs, same prompt length: the smaller rid goes first"
    assert batch.reqs == [b]


def test_victims_are_taken_until_the_rest_fit_and_without_a_tree_their_slots_are_freed():
    cm = engine(kv_slots=10, radix=False)
    r = running(cm, "R", [1, 2, 3, 4, 5], [6, 7, 8])  # 7 slots
    p = running(cm, "P", [9], [10])  # 1 slot
    q = running(cm, "Q", [11], [12, 13])  # 2 slots
    batch = batch_of(cm, [r, p, q])
    cm.journal = []
    assert batch.retract_decode() == [p, q]  # P frees 1 slot, not enough for Q and R; Q frees 2
    assert batch.reqs == [r]
    freed = [(op.reason, sorted(op.slots.tolist())) for op in cm.journal if op.kind == "free"]
    assert freed == [("retracted", [8]), ("retracted", [9, 10])]
    assert cm.token_to_kv_pool.available_size() == 3


def test_a_single_request_without_room_raises_kv_cache_exhausted():
    cm = engine(kv_slots=6, radix=False)
    a = running(cm, "A", [10, 11, 12, 13], [20, 21, 22])  # 6 slots: the whole pool
    batch = batch_of(cm, [a])
    with pytest.raises(KVCacheExhausted):
        batch.retract_decode()
