"""Unit tests of the future_map lab: your FutureMap under `minisgl lab test future_map`, else the engine's."""

import torch

from minisgl.labs.testing import component

FutureMap = component("future_map").FutureMap  # yours under `minisgl lab test`


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
