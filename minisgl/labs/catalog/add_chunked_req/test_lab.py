"""Unit tests of the add_chunked_req lab: your add_chunked_req under `minisgl lab test add_chunked_req`, else
the engine's.

Real objects only: a RadixCache, the KV and request pools, the CacheManager, Reqs and ScheduleBatch (no model
forward: a chunk "runs" by taking its KV slots and being cached, as the engine does between chunks). The
first chunk is cut by the engine's own add_one_req; yours gives every later one."""

import torch

from minisgl.labs.testing import component
from minisgl.mem_cache.cache_manager import CacheManager
from minisgl.mem_cache.memory_pool import ReqToTokenPool, TokenToKVPool
from minisgl.mem_cache.radix_cache import RadixCache
from minisgl.sampling.sampling_params import SamplingParams
from minisgl.scheduler.req import Req
from minisgl.scheduler.schedule_batch import ScheduleBatch
from minisgl.scheduler.schedule_policy import AddReqResult, PrefillAdder

component("add_chunked_req")  # installs your add_chunked_req on PrefillAdder when MINISGL_LAB names it

RATIO = 0.5
PROMPT = list(range(100, 110))  # 10 tokens


class Engine:
    """The scheduler's state that chunking touches, and a round's admission as get_new_batch_prefill does
    it."""

    def __init__(self, kv_slots: int = 64, rows: int = 64, chunk: int = 4):
        self.tree = RadixCache()
        self.pool = TokenToKVPool(kv_slots, num_layers=1, num_kv_heads=1, head_dim=1, dtype=torch.float32)
        self.req_to_token = ReqToTokenPool(4, 64)
        self.cache = CacheManager(self.tree, self.req_to_token, self.pool)
        self.rows, self.chunk = rows, chunk

    def adder(self, mixed_decode_rows: int = 0) -> PrefillAdder:
        return PrefillAdder(self.tree, self.pool, [], RATIO, self.rows, self.chunk, 8,
                            mixed_decode_rows=mixed_decode_rows, has_chunked_req=True)

    def first_chunk(self, prompt=PROMPT, max_new_tokens: int = 3) -> Req:
        req = Req("L", list(prompt), SamplingParams(max_new_tokens=max_new_tokens), set())
        req.init_next_round_input(self.tree)
        adder = PrefillAdder(self.tree, self.pool, [], RATIO, self.rows, self.chunk, 8)
        assert adder.add_one_req(req) == AddReqResult.OTHER and adder.new_chunked_req is req
        self.run(req)
        return req

    def run(self, req: Req) -> None:
        """The round runs: the chunk takes its KV slots, then cache_unfinished_req makes it the prefix."""
        batch = ScheduleBatch.init_new([req], self.req_to_token, self.pool, self.cache)
        batch.prepare_for_extend()
        self.cache.cache_unfinished_req(req)

    def next_round(self, req: Req, **kw) -> tuple[PrefillAdder, Req | None]:
        req.init_next_round_input()
        adder = self.adder(**kw)
        return adder, adder.add_chunked_req(req)


def test_a_middle_chunk_takes_the_next_chunk_and_returns_the_request():
    e = Engine(chunk=4)
    req = e.first_chunk()
    assert len(req.prefix_indices) == 4
    adder, left = e.next_round(req)
    assert left is req
    rec = adder.log[-1]
    assert (rec.source, rec.decision, rec.budget, rec.extend_range) == ("chunked_req", "chunked",
                                                                        "chunked_prefill_size", (4, 8))
    assert adder.can_run_list == [req] and adder.new_chunked_req is None
    assert (req.fill_ids, req.extend_input_len) == (PROMPT[:8], 4)


def test_the_last_chunk_is_admitted_whole_and_returns_none():
    e = Engine(chunk=4)
    req = e.first_chunk()
    e.next_round(req)
    e.run(req)
    adder, left = e.next_round(req)
    assert left is None
    rec = adder.log[-1]
    assert (rec.decision, rec.budget, rec.extend_range) == ("admitted", None, (8, 10))
    assert (req.fill_ids, req.extend_input_len) == (PROMPT, 2)


def test_the_chunk_pays_every_budget_but_reserves_no_future_tokens():
    e = Engine(kv_slots=64, rows=20, chunk=4)
    req = e.first_chunk(max_new_tokens=7)
    adder, _ = e.next_round(req)
    start = adder.initial.budgets
    assert adder.budgets() == {"rem_total_tokens": start["rem_total_tokens"] - 4, "rem_input_tokens": 16,
                               "rem_chunk_tokens": 0, "rem_kv_room": start["rem_kv_room"] - 4,
                               "rem_running": 7}
    assert adder.log[-1].after == adder.budgets()
    e.run(req)
    adder, _ = e.next_round(req)  # the last chunk: 2 rows, still no reservation
    assert adder.budgets()["rem_total_tokens"] == adder.initial.budgets["rem_total_tokens"] - 2


def test_a_remainder_exactly_one_chunk_long_is_the_last_chunk():
    e = Engine(chunk=5)
    req = e.first_chunk()  # [0, 5)
    adder, left = e.next_round(req)  # [5, 10): exactly the chunk, and the end of the prompt
    assert left is None
    assert (adder.log[-1].decision, adder.log[-1].extend_range) == ("admitted", (5, 10))


def test_fewer_rows_than_the_chunk_cut_it_and_are_named():
    e = Engine(rows=64, chunk=4)
    req = e.first_chunk()
    adder, left = e.next_round(req, mixed_decode_rows=61)  # decode rows of a MIXED round leave 3 prefill rows
    assert left is req
    rec = adder.log[-1]
    assert (rec.decision, rec.budget, rec.extend_range) == ("chunked", "max_prefill_tokens", (4, 7))


def test_the_kv_room_cuts_the_chunk():
    e = Engine(kv_slots=12, chunk=4)
    req = e.first_chunk()  # 4 slots, locked in the tree: 8 free
    e.pool.alloc(6)  # someone else holds 6: 2 left
    adder, left = e.next_round(req)
    assert left is req
    rec = adder.log[-1]
    assert (rec.decision, rec.budget, rec.extend_range) == ("chunked", "kv_cache", (4, 6))
    assert adder.budgets()["rem_kv_room"] == 0


def test_no_kv_room_refuses_the_chunk_and_keeps_the_request():
    e = Engine(kv_slots=12, chunk=4)
    req = e.first_chunk()
    e.pool.alloc(8)  # nothing free, nothing evictable
    adder, left = e.next_round(req)
    assert left is req
    rec = adder.log[-1]
    assert (rec.decision, rec.budget, rec.extend_range) == ("refused", "kv_cache", None)
    assert adder.can_run_list == [] and adder.budgets() == rec.before
    assert (req.fill_ids, req.extend_input_len) == (PROMPT, 6)  # untouched: it tries again next round


def test_a_whole_prompt_goes_through_chunk_by_chunk():
    e = Engine(chunk=3)
    req = e.first_chunk()
    ranges, left = [(0, 3)], req
    while left is not None:
        adder, left = e.next_round(req)
        ranges.append(adder.log[-1].extend_range)
        e.run(req)
        assert len(ranges) < 10, "the chunked request never finished"
    assert ranges == [(0, 3), (3, 6), (6, 9), (9, 10)]
    assert req.prefix_indices.numel() == 10 and e.tree.protected_size() == 10
