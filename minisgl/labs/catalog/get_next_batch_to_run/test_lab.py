"""Unit tests of the get_next_batch_to_run lab: your get_next_batch_to_run under `minisgl lab test
get_next_batch_to_run`, else the engine's. They drive a real Scheduler round by round (the bundled model,
loaded once for the file: the decode rounds need real tokens) and look at the batch each round runs and at
running_batch."""

from minisgl.entrypoints.engine import Engine
from minisgl.labs.testing import component
from minisgl.server.protocol import GenerateReqInput

component("get_next_batch_to_run")  # installs your method on Scheduler (when MINISGL_LAB names it)

_LOADED = Engine(dtype="float32", max_total_tokens=128)  # the weights, shared by every test's fresh engine


def engine(**flags) -> Engine:
    """A fresh scheduler and fresh pools on the loaded weights."""
    return _LOADED.fork(**flags)


def submit(eng: Engine, rid: str, prompt_len: int = 4, max_new_tokens: int = 4) -> None:
    ids = list(range(300, 300 + prompt_len))
    eng.submit(GenerateReqInput(rid=rid, input_ids=ids,
                                sampling_params={"max_new_tokens": max_new_tokens, "ignore_eos": True}))


def step(eng: Engine):
    """One round; returns the batch it ran (the scheduler's cur_batch), or None."""
    eng.step()
    return eng.scheduler.cur_batch


def rids(batch) -> list[str]:
    assert batch is not None, "no batch ran this round (get_next_batch_to_run returned None)"
    return [r.rid for r in batch.reqs]


def test_nothing_waiting_or_running_gives_none():
    eng = engine()
    assert eng.scheduler.get_next_batch_to_run() is None
    submit(eng, "A", max_new_tokens=1)
    assert step(eng) is not None
    assert step(eng) is None  # A finished in its prefill round: nothing is left to run


def test_a_new_request_is_prefilled_and_does_not_join_running_batch_yet():
    eng = engine()
    submit(eng, "A")
    batch = step(eng)
    assert batch.forward_mode.name == "EXTEND" and rids(batch) == ["A"]
    assert eng.scheduler.waiting_queue == []
    assert eng.scheduler.running_batch.is_empty()  # A is only last_batch until the next round merges it


def test_next_round_merges_the_prefill_batch_and_decodes_running_batch_itself():
    eng = engine()
    submit(eng, "A")
    step(eng)
    batch = step(eng)
    assert batch.forward_mode.name == "DECODE" and rids(batch) == ["A"]
    assert batch is eng.scheduler.running_batch  # a decode round runs running_batch, not a copy


def test_prefill_goes_first_while_merged_requests_wait():
    eng = engine()
    submit(eng, "A")
    step(eng)
    submit(eng, "B")
    batch = step(eng)
    assert batch.forward_mode.name == "EXTEND" and rids(batch) == ["B"]
    assert rids(eng.scheduler.running_batch) == ["A"]  # merged at the start of the round, not run
    batch = step(eng)
    assert batch.forward_mode.name == "DECODE" and rids(batch) == ["A", "B"]


def test_a_decode_batch_is_not_merged_again():
    eng = engine()
    submit(eng, "A", max_new_tokens=5)
    for _ in range(4):  # one prefill round, then decode rounds: last_batch is running_batch itself
        step(eng)
        assert len(eng.scheduler.running_batch.reqs) <= 1
    assert rids(eng.scheduler.running_batch) == ["A"]
    assert len(eng.scheduler.rid_to_req["A"].output_ids) == 4


def test_requests_finished_in_their_prefill_round_are_dropped_at_the_merge():
    eng = engine()
    submit(eng, "A", max_new_tokens=1)
    submit(eng, "B", max_new_tokens=3)
    batch = step(eng)
    assert rids(batch) == ["A", "B"]
    batch = step(eng)
    assert rids(batch) == ["B"] and rids(eng.scheduler.running_batch) == ["B"]


def test_the_request_being_chunked_stays_out_of_running_batch():
    eng = engine(chunked_prefill_size=4)
    submit(eng, "L", prompt_len=10, max_new_tokens=3)
    modes = []
    for _ in range(3):  # chunks of 4, 4 and 2 prompt tokens
        batch = step(eng)
        modes.append((batch.forward_mode.name, rids(batch)))
        if eng.scheduler.chunked_req is not None:
            assert eng.scheduler.running_batch.is_empty()  # L has no token to decode from yet
    assert modes == [("EXTEND", ["L"])] * 3
    batch = step(eng)
    assert batch.forward_mode.name == "DECODE" and rids(batch) == ["L"]


def test_a_mixed_batch_is_a_prefill_batch_its_decoders_come_back():
    eng = engine(chunked_prefill_size=4, enable_mixed_chunk=True)
    submit(eng, "A", max_new_tokens=6)
    step(eng)
    step(eng)  # A decodes alone
    submit(eng, "B", prompt_len=6, max_new_tokens=3)
    batch = step(eng)
    assert batch.forward_mode.name == "MIXED" and sorted(rids(batch)) == ["A", "B"]
    assert eng.scheduler.running_batch.is_empty()  # A rode in the MIXED batch, out of running_batch
    batch = step(eng)  # the merge brings A back (B is still being chunked: it stays out)
    assert batch is not None and "A" in rids(batch), (
        "A rode in last round's MIXED batch (forward_mode.is_extend() is true for it); the merge must bring "
        "it back to running_batch")
    a = eng.scheduler.rid_to_req["A"]
    assert len(a.output_ids) == 4  # one token every round: A never missed a round
