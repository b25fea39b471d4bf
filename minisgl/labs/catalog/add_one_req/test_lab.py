"""Unit tests of the add_one_req lab: your add_one_req under `minisgl lab test add_one_req`, else the
engine's.

Real objects only: a RadixCache, a KV pool, Reqs, and the engine's PrefillAdder with your method on it."""

import torch

from minisgl.labs.testing import component
from minisgl.mem_cache.memory_pool import TokenToKVPool
from minisgl.mem_cache.radix_cache import RadixCache
from minisgl.sampling.sampling_params import SamplingParams
from minisgl.scheduler.req import Req
from minisgl.scheduler.schedule_policy import AddReqResult, PrefillAdder

component("add_one_req")  # installs your add_one_req on PrefillAdder when MINISGL_LAB names it

RATIO = 0.5


def engine(kv_slots: int = 64):
    tree = RadixCache()
    pool = TokenToKVPool(kv_slots, num_layers=1, num_kv_heads=1, head_dim=1, dtype=torch.float32)
    return tree, pool


def req(rid: str, prompt_len: int, max_new_tokens: int, tree, first: int = 100) -> Req:
    r = Req(rid, list(range(first, first + prompt_len)), SamplingParams(max_new_tokens=max_new_tokens), set())
    r.init_next_round_input(tree)
    return r


def adder(tree, pool, running=(), rows=64, chunk=None, max_running=8) -> PrefillAdder:
    return PrefillAdder(tree, pool, list(running), RATIO, rows, chunk, max_running)


def budgets(a: PrefillAdder) -> dict:
    return a.budgets()


def test_a_whole_prompt_is_admitted_and_pays_every_budget():
    tree, pool = engine(64)
    a = adder(tree, pool, rows=20, chunk=16, max_running=4)
    r = req("A", 5, 3, tree)
    assert a.add_one_req(r) == AddReqResult.CONTINUE
    assert a.can_run_list == [r] and a.new_chunked_req is None
    rec = a.log[-1]
    assert (rec.decision, rec.budget, rec.extend_range, rec.need) == ("admitted", None, (0, 5), None)
    # rows 5 out of rows, chunk and KV room; rows + 3 future tokens out of rem_total_tokens; one request slot
    assert budgets(a) == {"rem_total_tokens": 64 - 5 - 3, "rem_input_tokens": 15, "rem_chunk_tokens": 11,
                          "rem_kv_room": 59, "rem_running": 3}
    assert rec.after == budgets(a) and (r.fill_ids, r.extend_input_len) == (list(range(100, 105)), 5)


def test_behind_an_admitted_request_a_prompt_longer_than_the_rows_left_is_refused():
    tree, pool = engine(64)
    a = adder(tree, pool, rows=8, chunk=16)
    assert a.add_one_req(req("A", 6, 2, tree)) == AddReqResult.CONTINUE
    before = budgets(a)
    b = req("B", 4, 2, tree, first=200)
    assert a.add_one_req(b) == AddReqResult.OTHER
    rec = a.log[-1]
    assert (rec.rid, rec.decision, rec.budget, rec.extend_range) == ("B", "refused", "max_prefill_tokens",
                                                                     None)
    assert budgets(a) == before and rec.after == before and b not in a.can_run_list
    # a prompt that fits in the rows left is admitted
    assert a.add_one_req(req("C", 2, 1, tree, first=300)) == AddReqResult.CONTINUE
    assert a.log[-1].decision == "admitted" and budgets(a)["rem_input_tokens"] == 0


def test_a_spent_chunk_refuses_even_a_short_prompt():
    tree, pool = engine(64)
    a = adder(tree, pool, rows=20, chunk=6)
    assert a.add_one_req(req("A", 6, 2, tree)) == AddReqResult.CONTINUE
    assert a.log[-1].decision == "admitted"  # exactly the chunk: admitted whole, not chunked
    assert a.add_one_req(req("C", 2, 2, tree, first=200)) == AddReqResult.OTHER
    assert (a.log[-1].decision, a.log[-1].budget) == ("refused", "chunked_prefill_size")


def test_request_slots_are_checked_first():
    tree, pool = engine(64)
    running = req("R", 4, 4, tree, first=500)
    a = adder(tree, pool, running=[running], rows=0, chunk=0, max_running=1)  # no slot, no rows, no chunk
    assert a.add_one_req(req("A", 3, 2, tree)) == AddReqResult.OTHER
    assert (a.log[-1].decision, a.log[-1].budget) == ("refused", "max_running_requests")
    a = adder(tree, pool, running=[running], rows=0, chunk=0, max_running=2)  # a slot, but no rows
    assert a.add_one_req(req("A", 3, 2, tree)) == AddReqResult.OTHER
    assert a.log[-1].budget == "max_prefill_tokens"


def test_the_running_requests_reservation_can_refuse_on_kv_cache():
    tree, pool = engine(24)
    running = req("R", 4, 10, tree, first=500)  # may still produce 10: 10 * 0.5 = 5 slots reserved
    a = adder(tree, pool, running=[running], rows=64, chunk=None)
    assert budgets(a)["rem_total_tokens"] == 24 - 5
    big = req("B", 4, 16, tree)  # needs 4 + 16 = 20 > 19
    assert a.add_one_req(big) == AddReqResult.NO_TOKEN
    rec = a.log[-1]
    assert (rec.decision, rec.budget, rec.need) == ("refused", "kv_cache", 20)
    assert budgets(a) == rec.before and tree.protected_size() == 0
    assert a.add_one_req(req("S", 4, 15, tree)) == AddReqResult.CONTINUE  # 19 fits exactly
    assert budgets(a)["rem_total_tokens"] == 0


def test_the_first_request_of_an_idle_engine_always_fits():
    tree, pool = engine(16)
    a = adder(tree, pool, rows=64, chunk=None)
    r = req("A", 4, 30, tree)  # 4 + 30 > 16, but nothing is running and nothing admitted yet
    assert a.add_one_req(r) == AddReqResult.CONTINUE
    assert budgets(a)["rem_total_tokens"] == 16 - 4 - 30 and budgets(a)["rem_kv_room"] == 12
    # the second one gets no such exception
    assert a.add_one_req(req("B", 2, 1, tree, first=200)) == AddReqResult.NO_TOKEN
    assert (a.log[-1].budget, a.log[-1].need) == ("kv_cache", 3)


def test_a_prompt_longer_than_the_chunk_is_admitted_as_its_first_chunk():
    tree, pool = engine(64)
    a = adder(tree, pool, rows=20, chunk=4)
    r = req("L", 10, 5, tree)
    assert a.add_one_req(r) == AddReqResult.OTHER
    assert a.new_chunked_req is r and a.can_run_list == [r]
    rec = a.log[-1]
    assert (rec.decision, rec.budget, rec.extend_range) == ("chunked", "chunked_prefill_size", (0, 4))
    assert (r.fill_ids, r.extend_input_len) == (list(range(100, 104)), 4)
    # a chunk reserves no future tokens
    assert budgets(a) == {"rem_total_tokens": 60, "rem_input_tokens": 16, "rem_chunk_tokens": 0,
                          "rem_kv_room": 60, "rem_running": 7}


def test_the_first_candidate_is_cut_by_the_rows_or_by_the_kv_room():
    tree, pool = engine(64)
    a = adder(tree, pool, rows=3, chunk=8)
    assert a.add_one_req(req("L", 10, 2, tree)) == AddReqResult.OTHER
    assert (a.log[-1].decision, a.log[-1].budget, a.log[-1].extend_range) == ("chunked", "max_prefill_tokens",
                                                                              (0, 3))
    tree, pool = engine(64)
    pool.alloc(62)  # 2 slots free
    a = adder(tree, pool, rows=20, chunk=8)
    r = req("L", 10, 2, tree)
    assert a.add_one_req(r) == AddReqResult.OTHER
    assert (a.log[-1].decision, a.log[-1].budget, a.log[-1].extend_range) == ("chunked", "kv_cache", (0, 2))
    assert budgets(a)["rem_kv_room"] == 0


def cached(tree, pool, prompt_len: int, first: int = 100) -> torch.Tensor:
    """A finished request's prompt left in the tree: evictable slots."""
    slots = pool.alloc(prompt_len)
    tree.insert(list(range(first, first + prompt_len)), slots)
    return slots


def test_a_cached_prefix_is_locked_and_stops_counting_as_room():
    tree, pool = engine(32)
    slots = cached(tree, pool, 6)
    a = adder(tree, pool, rows=64, chunk=None)
    assert budgets(a)["rem_kv_room"] == 32  # 26 free + 6 evictable
    r = req("A", 9, 2, tree)  # its first 6 tokens are cached
    assert r.prefix_indices.tolist() == slots.tolist()
    assert a.add_one_req(r) == AddReqResult.CONTINUE
    rec = a.log[-1]
    assert (rec.prefix_locked, rec.extend_range, r.extend_input_len) == (6, (6, 9), 3)
    assert (tree.protected_size(), tree.evictable_size()) == (6, 0)
    assert budgets(a)["rem_kv_room"] == 32 - 6 - 3 and budgets(a)["rem_total_tokens"] == 32 - 6 - 3 - 2


def test_a_prompt_that_cannot_run_gives_its_lock_back():
    tree, pool = engine(10)
    cached(tree, pool, 3)
    pool.alloc(4)  # 3 free + 3 evictable = 6 slots of room; the cached 3 stop being room once locked
    a = adder(tree, pool, rows=64, chunk=None)  # no chunking: a prompt must fit whole
    r = req("A", 8, 1, tree)  # 3 cached + 5 new > 3 slots left
    assert a.add_one_req(r) == AddReqResult.NO_TOKEN
    rec = a.log[-1]
    assert (rec.decision, rec.budget, rec.need, rec.prefix_locked) == ("refused", "kv_cache", 6, 0)
    assert (tree.protected_size(), tree.evictable_size()) == (0, 3)
    assert budgets(a) == rec.before and a.can_run_list == []

