"""Bad requests get a 4xx status line and OpenAI's error body, never a 200 with a broken stream; afterwards
the server still serves and holds nothing: every KV slot free or cached, nothing running or waiting."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.server.conftest import wait_drained

CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"
USER = [{"role": "user", "content": "hi"}]
TOO_LONG = " ".join(["word"] * 1500)  # > the 1024-token context of the test server

# (name, path, body: dict, or str sent as raw bytes, expected status, word the message must contain)
CASES = [
    ("malformed JSON", CHAT, "{not json", 400, "JSON"),
    ("body is an array", CHAT, "[]", 400, "object"),
    ("no messages", CHAT, {"messages": []}, 400, "messages"),
    ("unknown role", CHAT, {"messages": [{"role": "robot", "content": "x"}]}, 400, "role"),
    ("unknown model", CHAT, {"model": "gpt-9", "messages": USER}, 404, "gpt-9"),
    ("negative temperature", CHAT, {"messages": USER, "temperature": -1}, 400, "temperature"),
    ("temperature as a string", CHAT, {"messages": USER, "temperature": "0.5"}, 400, "temperature"),
    ("top_p of 0", CHAT, {"messages": USER, "top_p": 0}, 400, "top_p"),
    ("top_k of 0", CHAT, {"messages": USER, "top_k": 0}, 400, "top_k"),
    ("max_tokens of 0", CHAT, {"messages": USER, "max_tokens": 0}, 400, "max_tokens"),
    ("n of 17", CHAT, {"messages": USER, "n": 17}, 400, "16"),
    ("negative seed", CHAT, {"messages": USER, "seed": -1}, 400, "seed"),
    ("17 stop strings", CHAT, {"messages": USER, "stop": [str(i) for i in range(17)]}, 400, "stop"),
    ("prompt too long", CHAT, {"messages": [{"role": "user", "content": TOO_LONG}]}, 400, "tokens"),
    ("prompt too long, streamed", CHAT, {"messages": [{"role": "user", "content": TOO_LONG}], "stream": True},
     400, "tokens"),
    ("bad parameter, streamed", CHAT, {"messages": USER, "temperature": -1, "stream": True}, 400, "temperature"),
    ("empty prompt", COMPLETIONS, {"prompt": ""}, 400, "prompt"),
    ("token id past the vocabulary", COMPLETIONS, {"prompt": [1, 2, 10**6]}, 400, "vocabulary"),
    ("65 prompts", COMPLETIONS, {"prompt": ["a"] * 65}, 400, "at most 64"),
    ("generate with text and input_ids", "/generate", {"text": "a", "input_ids": [1]}, 400, "exactly one"),
    ("generate with an unknown sampling key", "/generate", {"text": "a", "sampling_params": {"max_tokens": 3}},
     400, "max_tokens"),
    ("generate with empty input_ids", "/generate", {"input_ids": []}, 400, "empty"),
    ("unknown endpoint", "/v1/embeddings", {"input": "x"}, 404, "/v1/embeddings"),
]


def _assert_openai_error(resp: httpx.Response, status: int, word: str) -> None:
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"].startswith("application/json")
    error = resp.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert word.lower() in error["message"].lower()
    assert error["type"]


def _post(http: httpx.Client, path: str, body: dict | str) -> httpx.Response:
    if isinstance(body, str):
        return http.post(path, content=body, headers={"content-type": "application/json"})
    return http.post(path, json=body)


@pytest.mark.parametrize("name,path,body,status,word", CASES, ids=[c[0] for c in CASES])
def test_bad_request_gets_openai_error(http, name, path, body, status, word):
    _assert_openai_error(_post(http, path, body), status, word)


def test_wrong_method_gets_405(http):
    _assert_openai_error(http.get(CHAT), 405, "not allowed")


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"}, {"Authorization": "sk-minisgl-test"}])
def test_missing_or_wrong_api_key_gets_401_except_on_health(server, headers):
    with httpx.Client(base_url=server.url, timeout=60) as anon:
        for method, path in (("POST", CHAT), ("POST", COMPLETIONS), ("POST", "/generate"), ("GET", "/v1/models"),
                             ("POST", "/flush_cache"), ("POST", "/abort_request")):
            _assert_openai_error(anon.request(method, path, json={}, headers=headers), 401, "API key")
        assert anon.get("/health").status_code == 200


def test_duplicate_rid_is_refused_and_abort_request_ends_the_first(http):
    body = {"rid": "dup-rid", "text": "Once upon a time", "stream": True,
            "sampling_params": {"max_new_tokens": 500, "ignore_eos": True, "temperature": 0}}
    with http.stream("POST", "/generate", json=body) as first:
        assert first.status_code == 200
        lines = first.iter_lines()
        assert next(line for line in lines if line.startswith("data: "))
        _assert_openai_error(http.post("/generate", json={**body, "stream": False}), 400, "duplicate")
        assert http.post("/abort_request", json={"rid": "dup-rid"}).json() == {"rid": "dup-rid", "found": True}
        data = [json.loads(line[6:]) for line in lines if line.startswith("data: {")]
    assert data[-1]["meta_info"]["finish_reason"]["type"] == "abort"
    assert len(data[-1]["output_ids"]) < 500


def test_flush_cache_and_health_after_errors(http, client, model):
    """Errors of its own (refused before and after tokenizing, streamed or not) next to a request that
    fills the radix cache: afterwards nothing runs or waits, /flush_cache empties the cache it can see
    is full, and the server still answers."""
    answered = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "Hello!"}],
                                              max_tokens=4, temperature=0)
    assert answered.choices[0].finish_reason in ("stop", "length")
    for name in ("malformed JSON", "prompt too long", "prompt too long, streamed", "bad parameter, streamed"):
        _, path, body, status, word = next(c for c in CASES if c[0] == name)
        _assert_openai_error(_post(http, path, body), status, word)
    load = wait_drained(http)
    assert load["num_running_reqs"] == 0 and load["num_waiting_reqs"] == 0
    assert load["cached_slots"] > 0, "the answered request must have left its tokens in the radix cache"
    assert http.post("/flush_cache").json()["success"] is True
    load = wait_drained(http)
    assert load["free_slots"] == load["total_slots"] and load["cached_slots"] == 0
    resp = client.chat.completions.create(model=model, messages=USER, max_tokens=4, temperature=0)
    assert resp.choices[0].finish_reason in ("stop", "length")
    assert http.get("/health").json()["num_pending_requests"] == 0
