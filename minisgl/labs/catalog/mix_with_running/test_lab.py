"""Unit tests of the mix_with_running lab: your ScheduleBatch.mix_with_running under
`minisgl lab test mix_with_running`, else the engine's.

Real pools, a real RadixCache and CacheManager and real Req objects; the prefill batch and the running batch
are made by the engine's own prepare_for_extend and prepare_for_decode, as get_new_batch_prefill makes them.
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

component("mix_with_running")  # installs your method on ScheduleBatch (under `minisgl lab test`)


def engine() -> CacheManager:
    kv = TokenToKVPool(64, num_layers=1, num_kv_heads=1, head_dim=1, dtype=torch.float32)
    return CacheManager(RadixCache(), ReqToTokenPool(8, 64), kv)


def batch_of(cm: CacheManager, reqs) -> ScheduleBatch:
    return ScheduleBatch.init_new(reqs, cm.req_to_token_pool, cm.token_to_kv_pool, cm)


def new_req(cm: CacheManager, rid: str, prompt: list[int]) -> Req:
    req = Req(rid, list(prompt), SamplingParams(max_new_tokens=8, ignore_eos=True), eos_token_ids=set())
    req.init_next_round_input(cm.tree_cache)
    return req


def running(cm: CacheManager, rid: str, prompt: list[int], outputs: list[int]) -> Req:
    """Prefilled by the engine's prepare_for_extend, then given `outputs` as its sampled tokens."""
    req = new_req(cm, rid, prompt)
    batch_of(cm, [req]).prepare_for_extend()
    req.output_ids += outputs
    for _ in outputs[1:]:  # each later token's round gave the token before it a slot
        cm.req_to_token_pool.req_to_token[req.req_pool_idx, req.seqlen - 2] = cm.alloc_token_slots(1)
    return req


def mixed(cm: CacheManager, prompts: dict[str, list[int]], decoding: list[Req]) -> ScheduleBatch:
    new = batch_of(cm, [new_req(cm, rid, p) for rid, p in prompts.items()])
    new.prepare_for_extend()
    run = batch_of(cm, decoding)
    run.prepare_for_decode()
    new.mix_with_running(run)
    return new


def test_the_decode_rows_come_after_the_prefill_rows():
    cm = engine()
    a = running(cm, "A", [10, 11, 12], [20, 21])  # slots 1-3 for its prompt, 4 for 20; 21 is fed now
    b = running(cm, "B", [30, 31], [40])  # slots 5-6 for its prompt; 40 is fed now
    batch = mixed(cm, {"C": [50, 51, 52, 53]}, [a, b])
    assert batch.forward_mode == ForwardMode.MIXED
    assert [r.rid for r in batch.reqs] == ["C", "A", "B"]
    assert batch.input_ids == [50, 51, 52, 53, 21, 40]
    assert batch.extend_lens == [4, 1, 1]
    assert batch.prefix_lens == [0, 4, 2], "a decode row's prefix: every token of the request but the fed one"
    assert batch.seq_lens == [4, 5, 3]
    assert batch.req_pool_indices == [c.req_pool_idx for c in batch.reqs]
    assert batch.out_cache_loc.tolist() == [7, 8, 9, 10, 11, 12], "C's four slots, then A's and B's new ones"


def test_the_decoding_requests_are_named():
    cm = engine()
    a = running(cm, "A", [10, 11, 12], [20])
    batch = mixed(cm, {"C": [50, 51]}, [a])
    assert [r.rid for r in batch.decoding_reqs] == ["A"]
    assert batch.decoding_reqs is not batch.reqs


def test_a_running_request_looks_like_a_one_token_extend():
    cm = engine()
    a = running(cm, "A", [10, 11, 12], [20, 21])
    mixed(cm, {"C": [50, 51]}, [a])
    assert a.fill_ids == [10, 11, 12, 20, 21]
    assert a.extend_input_len == 1


def test_the_prefill_part_keeps_its_cached_prefix_and_chunk():
    cm = engine()
    a = running(cm, "A", [10, 11, 12, 13], [20])
    cm.cache_unfinished_req(a)  # A's prompt enters the radix tree
    batch = mixed(cm, {"C": [10, 11, 12, 14, 15]}, [a])  # C shares 10, 11, 12 with A
    assert batch.prefix_lens[0] == 3 and batch.extend_lens[0] == 2
    assert batch.input_ids == [14, 15, 20]
    assert batch.prefix_lens[1] == 4 and batch.seq_lens == [5, 5]


def test_several_prefills_and_several_running():
    cm = engine()
    runs = [running(cm, rid, [10 + i, 11 + i], [20 + i]) for i, rid in enumerate("AB")]
    batch = mixed(cm, {"C": [50], "D": [60, 61]}, runs)
    assert [r.rid for r in batch.reqs] == ["C", "D", "A", "B"]
    assert batch.extend_lens == [1, 2, 1, 1]
    assert batch.input_ids == [50, 60, 61, 20, 21]
    assert len(batch.out_cache_loc) == 5
