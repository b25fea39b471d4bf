"""SGLang's /pause_generation and /continue_generation on the shared real server: "in_place" keeps every
request where it is (a new one waits in the scheduler's queue, answered once generation continues); the
modes minisgl does not have (SGLang's default "abort", and "retract") are a 400 in OpenAI's error format."""

from __future__ import annotations

import threading
import time

import httpx
import pytest

from tests.server.conftest import wait_drained

BODY = {"text": " one two three", "stream": False,
        "sampling_params": {"max_new_tokens": 2, "temperature": 0, "ignore_eos": True}}


def _wait_load(http: httpx.Client, done, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        load = http.get("/health").json()["load"]
        if done(load):
            return load
        if time.monotonic() > deadline:
            raise AssertionError(f"the server's load did not reach the state within {timeout} s: {load}")
        time.sleep(0.05)


def _in_thread(http: httpx.Client, body: dict) -> tuple[threading.Thread, dict]:
    """POST /generate on a client of its own (one httpx.Client is not shared between threads)."""
    out: dict = {}

    def post() -> None:
        with httpx.Client(base_url=http.base_url, headers=http.headers, timeout=300) as own:
            out.update(own.post("/generate", json=body).json())

    thread = threading.Thread(target=post, daemon=True)
    thread.start()
    return thread, out


def test_in_place_holds_a_new_request_in_the_queue_until_generation_continues(http):
    wait_drained(http)
    paused = http.post("/pause_generation", json={"mode": "in_place"})
    assert paused.status_code == 200 and paused.json()["success"] is True
    try:
        thread, out = _in_thread(http, {**BODY, "rid": "PAUSED-IN-PLACE"})
        load = _wait_load(http, lambda load: load["num_waiting_reqs"] == 1)
        assert load["num_running_reqs"] == 0 and thread.is_alive() and not out
        # while paused, control messages are still answered: a flush is refused, the queue is not empty
        assert http.post("/flush_cache").status_code == 400
    finally:
        assert http.post("/continue_generation").json()["success"] is True
    thread.join(timeout=120)
    assert out["meta_info"]["finish_reason"]["type"] == "length" and len(out["output_ids"]) == 2
    wait_drained(http)


@pytest.mark.parametrize("body", [{}, {"mode": "abort"}, {"mode": "retract"}])
def test_a_mode_minisgl_lacks_is_refused_and_nothing_pauses(http, body):
    """SGLang's default mode "abort" and its "retract" are a 400 that names the mode minisgl has."""
    resp = http.post("/pause_generation", json=body)
    assert resp.status_code == 400
    error = resp.json()["error"]
    assert "in_place" in error["message"] and error["type"] == "invalid_request_error"
    rid = f"NOT-PAUSED-{body.get('mode', 'default')}"  # a rid of its own: never reused in the shared trace
    answered = http.post("/generate", json={**BODY, "rid": rid}).json()
    assert answered["meta_info"]["finish_reason"]["type"] == "length"
