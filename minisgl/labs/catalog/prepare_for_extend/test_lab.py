"""Unit tests of the prepare_for_extend lab: your ScheduleBatch.prepare_for_extend under
`minisgl lab test prepare_for_extend`, else the engine's.

Real pools, a real RadixCache and CacheManager, real Req objects; no model. The token ids are the bundled
tokenizer's for the shared_prefix scenario's prompts, so the R1/R2 test is the lesson's round.
"""

import torch

from minisgl.labs.testing import component
from minisgl.mem_cache.cache_manager import CacheManager
from minisgl.mem_cache.memory_pool import ReqToTokenPool, TokenToKVPool
from minisgl.mem_cache.radix_cache import RadixCache
from minisgl.model_executor.forward_batch_info import ForwardMode
from minisgl.sampling.sampling_params import SamplingParams
from minisgl.scheduler.req import Req
from minisgl.scheduler.schedule_batch import ScheduleBatch

# installs your prepare_for_extend on ScheduleBatch (under `minisgl lab test`)
component("prepare_for_extend")

SHARED = [2382, 2654, 4461]  # " red green blue"
R1_IDS = [582, 827, 1296, 1876, 2531, 2976]  # " one two three four five six"
R2_IDS = SHARED + [2644, 2767, 2698]  # " red green blue cat dog fish"


def engine(kv_slots=64, req_slots=8, context=32) -> CacheManager:
    r2t = ReqToTokenPool(req_slots, context)
    kv = TokenToKVPool(kv_slots, num_layers=1, num_kv_heads=1, head_dim=1, dtype=torch.float32)
    return CacheManager(RadixCache(), r2t, kv)


def new_req(rid, ids, output=()) -> Req:
    req = Req(rid, list(ids), SamplingParams(max_new_tokens=4, ignore_eos=True), eos_token_ids=set())
    req.output_ids = list(output)
    return req


def admit(cm: CacheManager, req: Req) -> Req:
    """What admission does before prepare_for_extend: match the prefix, lock it (the CacheManager's
    contract)."""
    req.init_next_round_input(cm.tree_cache)
    cm.tree_cache.inc_lock_ref(req.last_node)
    return req


def plan(cm: CacheManager, reqs) -> ScheduleBatch:
    batch = ScheduleBatch.init_new(reqs, cm.req_to_token_pool, cm.token_to_kv_pool, cm)
    batch.prepare_for_extend()
    return batch


def row(cm: CacheManager, req: Req, n: int) -> list[int]:
    return cm.req_to_token_pool.req_to_token[req.req_pool_idx, :n].tolist()


def r0_ran_and_finished(cm: CacheManager) -> None:
    """R0 (" red green blue") ran alone in request slot 0, KV slots 1-3, and finished: its KV stays cached."""
    r0 = admit(cm, new_req("R0", SHARED))
    (r0.req_pool_idx,) = cm.req_to_token_pool.alloc(1)
    cm.req_to_token_pool.req_to_token[r0.req_pool_idx, :3] = cm.alloc_token_slots(3)
    r0.output_ids.append(198)
    cm.cache_finished_req(r0)  # the tree takes slots 1-3; request slot 0 goes to the back of the free list


def test_one_request_alone():
    cm = engine()
    r0 = admit(cm, new_req("R0", SHARED))
    b = plan(cm, [r0])
    assert b.forward_mode == ForwardMode.EXTEND
    assert (b.prefix_lens, b.extend_lens, b.seq_lens) == ([0], [3], [3])
    assert b.req_pool_indices == [0] and r0.req_pool_idx == 0
    assert b.input_ids == SHARED
    assert b.out_cache_loc.tolist() == [1, 2, 3]  # the lowest free KV slots (slot 0 is never handed out)
    assert row(cm, r0, 3) == [1, 2, 3]


def test_the_lesson_round_r1_and_r2_nine_rows():
    cm = engine()
    r0_ran_and_finished(cm)
    r1, r2 = admit(cm, new_req("R1", R1_IDS)), admit(cm, new_req("R2", R2_IDS))
    assert r2.prefix_indices.tolist() == [1, 2, 3]  # R2 starts with R0's prompt
    b = plan(cm, [r1, r2])
    assert b.req_pool_indices == [1, 2]  # slot 0 went back to the end of the free list
    assert b.prefix_lens == [0, 3]
    assert b.extend_lens == [6, 3]
    assert b.seq_lens == [6, 6]
    assert b.input_ids == R1_IDS + R2_IDS[3:]  # nine rows: R2's cached prefix is not computed again
    assert b.out_cache_loc.tolist() == [4, 5, 6, 7, 8, 9, 10, 11, 12]
    assert row(cm, r1, 6) == [4, 5, 6, 7, 8, 9]
    assert row(cm, r2, 6) == [1, 2, 3, 10, 11, 12]  # R0's cached slots, then R2's own new ones


def test_the_round_takes_its_kv_slots_in_one_allocation():
    cm = engine()
    r0_ran_and_finished(cm)
    reqs = [admit(cm, new_req("R1", R1_IDS)), admit(cm, new_req("R2", R2_IDS))]
    cm.journal = []  # what the trace turns into kv.alloc events, one per alloc_token_slots call
    plan(cm, reqs)
    allocs = [op.slots.tolist() for op in cm.journal if op.kind == "alloc"]
    assert allocs == [[4, 5, 6, 7, 8, 9, 10, 11, 12]], (
        "one self.alloc_token_slots(sum(extend_lens)) per round")


def test_a_chunked_prompt_keeps_its_request_slot_and_reads_its_first_chunk():
    cm = engine()
    prompt = R1_IDS + SHARED  # nine tokens, prefilled as 5 + 4
    req = admit(cm, new_req("L", prompt))
    req.set_extend_range(0, 5)
    b1 = plan(cm, [req])
    assert (b1.prefix_lens, b1.extend_lens, b1.seq_lens) == ([0], [5], [5])
    assert b1.input_ids == prompt[:5]
    cm.cache_unfinished_req(req)  # after the chunk: its KV is the prefix of the next one
    free_req_slots = cm.req_to_token_pool.available_size()

    req.init_next_round_input()  # the scheduler's chunked_req: fill_ids is the whole prompt again
    b2 = plan(cm, [req])
    assert cm.req_to_token_pool.available_size() == free_req_slots, "a request that has a slot keeps it"
    assert b2.req_pool_indices == b1.req_pool_indices
    assert (b2.prefix_lens, b2.extend_lens, b2.seq_lens) == ([5], [4], [9])
    assert b2.input_ids == prompt[5:]
    assert b2.out_cache_loc.tolist() == [6, 7, 8, 9]
    assert row(cm, req, 9) == [1, 2, 3, 4, 5, 6, 7, 8, 9]


def test_a_resumed_request_computes_its_output_tokens_after_the_cached_prompt():
    cm = engine()
    r0_ran_and_finished(cm)  # the cache holds " red green blue" in slots 1-3
    req = admit(cm, new_req("B", SHARED, output=[2644, 2767]))  # retracted after two tokens, now back
    assert req.fill_ids == SHARED + [2644, 2767]
    b = plan(cm, [req])
    assert (b.prefix_lens, b.extend_lens, b.seq_lens) == ([3], [2], [5])
    assert b.input_ids == [2644, 2767], "the rows are fill_ids after the prefix, output tokens included"
    assert row(cm, req, 5) == [1, 2, 3] + b.out_cache_loc.tolist()


def test_a_short_free_list_evicts_the_radix_cache():
    cm = engine(kv_slots=8)
    r0_ran_and_finished(cm)  # slots 1-3 cached and unlocked; 4-8 free
    req = admit(cm, new_req("R1", R1_IDS + [2644]))  # seven new tokens, only five free slots
    b = plan(cm, [req])
    assert b.out_cache_loc.tolist() == [4, 5, 6, 7, 8, 1, 2], "take the slots with self.alloc_token_slots"
    assert cm.tree_cache.total_size() == 0
    assert row(cm, req, 7) == [4, 5, 6, 7, 8, 1, 2]


def test_requests_without_a_prefix_or_with_one_mixed_in_any_order():
    cm = engine()
    r0_ran_and_finished(cm)
    r2, r1 = admit(cm, new_req("R2", R2_IDS)), admit(cm, new_req("R1", R1_IDS))
    b = plan(cm, [r2, r1])  # the cached one first this time
    assert (b.prefix_lens, b.extend_lens, b.seq_lens) == ([3, 0], [3, 6], [6, 6])
    assert b.input_ids == R2_IDS[3:] + R1_IDS
    assert b.out_cache_loc.tolist() == [4, 5, 6, 7, 8, 9, 10, 11, 12]
    assert row(cm, r2, 6) == [1, 2, 3, 4, 5, 6]
    assert row(cm, r1, 6) == [7, 8, 9, 10, 11, 12]
