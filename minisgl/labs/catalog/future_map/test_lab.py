"""Unit tests of the future_map lab: your FutureMap and split_launched_rows under `minisgl lab test
future_map`, else the engine's."""

import torch

from minisgl.labs.testing import component
from minisgl.sampling.sampling_params import SamplingParams
from minisgl.scheduler.finish_reason import FINISH_LENGTH
from minisgl.scheduler.req import Req

FutureMap = component("future_map").FutureMap  # yours under `minisgl lab test`
split_launched_rows = component("future_map").split_launched_rows


def test_the_ring_has_room_for_three_batches():
    fm = FutureMap(4)
    assert fm.size == 13
    assert fm.future_ct == 0
    assert fm.token_ids_buf.dtype == torch.int64 and fm.token_ids_buf.shape == (14,), "indices 1 .. 13, and 0"
    assert not fm.token_ids_buf.any()


def test_indices_start_at_one_and_follow_on():
    fm = FutureMap(4)
    assert fm.alloc_future_indices(3) == [1, 2, 3]
    assert fm.alloc_future_indices(2) == [4, 5]
    assert fm.future_ct == 5


def test_after_the_last_index_comes_the_first():
    fm = FutureMap(1)  # indices 1 .. 4
    assert fm.alloc_future_indices(3) == [1, 2, 3]
    assert fm.alloc_future_indices(2) == [4, 1], "a batch may straddle the wrap"
    assert fm.future_ct == 1
    assert fm.alloc_future_indices(4) == [2, 3, 4, 1]
    assert fm.future_ct == 1


def test_a_stored_token_is_what_its_placeholder_resolves_to():
    fm = FutureMap(2)
    first = fm.alloc_future_indices(2)
    fm.store_to_future_map(first, [101, 102])
    ids = torch.tensor([-first[1], 7, -first[0]])
    assert fm.resolve_future_token_ids(ids).tolist() == [102, 7, 101]
    assert ids.tolist() == [-first[1], 7, -first[0]], "resolve returns a new tensor; the input is left alone"


def test_ids_that_are_not_placeholders_stay():
    fm = FutureMap(2)
    fm.store_to_future_map([1], [55])
    assert fm.resolve_future_token_ids(torch.tensor([0, 1, 2, 49151])).tolist() == [0, 1, 2, 49151]


def test_a_later_round_overwrites_an_index_it_wrapped_to():
    fm = FutureMap(1)  # indices 1 .. 4
    fm.store_to_future_map(fm.alloc_future_indices(4), [10, 11, 12, 13])
    again = fm.alloc_future_indices(1)
    assert again == [1]
    fm.store_to_future_map(again, [20])
    assert fm.resolve_future_token_ids(torch.tensor([-1, -2, -4])).tolist() == [20, 11, 13]


def _req(rid: str, *placeholders: int, finished: bool = False) -> Req:
    req = Req(rid, [1, 2, 3], SamplingParams(max_new_tokens=8, ignore_eos=True), eos_token_ids=set())
    req.future_token_ids = list(placeholders)
    if finished:
        req.finished_reason = FINISH_LENGTH(length=8)
    return req


def test_rows_still_waiting_are_kept_and_consumed():
    a, b = _req("a", -1, -3), _req("b", -2)
    assert split_launched_rows([a, b], [-1, -2], None) == ([0, 1], [])
    assert a.future_token_ids == [-3] and b.future_token_ids == [], "the oldest placeholder is popped"


def test_a_request_that_finished_meanwhile_has_a_late_row():
    a, b = _req("a", -4, finished=True), _req("b", -5)
    assert split_launched_rows([a, b], [-4, -5], None) == ([1], [0])
    assert a.future_token_ids == [], "a late row is consumed too"


def test_a_retracted_request_is_in_neither_list():
    a, b = _req("a"), _req("b", -7)  # a was retracted: its placeholders were dropped
    assert split_launched_rows([a, b], [-6, -7], None) == ([1], [])
    c = _req("c", -9)  # retracted and re-admitted: its placeholder is from a later round
    assert split_launched_rows([c], [-8], None) == ([], [])
    assert c.future_token_ids == [-9], "a row that is not the request's is left alone"


def test_the_chunked_request_is_kept_as_it_is():
    a, chunk = _req("a", -1), _req("chunk")
    assert split_launched_rows([chunk, a], [-2, -1], chunk) == ([0, 1], [])
    assert chunk.future_token_ids == []
