"""The TokenizerManager's two writers: its receive loop and each request's handler task. Which writes first
when both are ready follows the clock, so a served golden lists their events in delivery order."""

from __future__ import annotations

from tracer.normalize import delivery_order


def recv():
    return {"proc": "tokenizer_manager", "name": "ipc.recv", "rids": ["R1"],
            "attrs": {"msg": "BatchStrOutput", "src": "detokenizer"}}


def woken(text, finished=False):
    return {"proc": "tokenizer_manager", "name": "tm.waiter_woken", "rid": "R1",
            "attrs": {"delta_text": text, "finished": finished}}


def chunk(text, index):
    return {"proc": "tokenizer_manager", "name": "http.sse_chunk", "rid": "R1", "attrs": {"delta": text, "index": index}}


def handler(name):
    return {"proc": "tokenizer_manager", "name": name, "rid": "R1"}


# as the golden of the data_parallel scenario lists them: the handler writes each chunk before the next receive
IN_ORDER = [handler("http.request_received"), handler("ipc.send"),
            recv(), woken("The"), chunk("", 0), chunk("The", 1),
            recv(), woken(" capital"), chunk(" capital", 2),
            recv(), woken(" of", True), chunk(" of", 3), chunk("", 4), handler("http.response_finished")]


def test_events_written_in_delivery_order_stay_as_they_are():
    assert delivery_order(IN_ORDER) == IN_ORDER


def test_a_receive_written_before_the_last_chunk_is_listed_after_it():
    late = IN_ORDER[:8] + IN_ORDER[9:11] + [IN_ORDER[8]] + IN_ORDER[11:]  # " capital" written after the next wake
    assert [r["name"] for r in late][8:11] == ["ipc.recv", "tm.waiter_woken", "http.sse_chunk"]
    assert delivery_order(late) == IN_ORDER


def test_two_deltas_in_one_chunk_follow_the_second_wake():
    merged = IN_ORDER[:8] + IN_ORDER[9:11] + [chunk(" capital of", 2), chunk("", 3), handler("http.response_finished")]
    listed = delivery_order(merged)
    assert [r["name"] for r in listed][-5:] == ["ipc.recv", "tm.waiter_woken", "http.sse_chunk", "http.sse_chunk",
                                                "http.response_finished"]
    assert listed[-3]["attrs"]["delta"] == " capital of"


def test_a_request_without_wakes_keeps_its_order():
    events = [handler("http.request_received"), handler("http.response_finished")]
    assert delivery_order(events) == events
