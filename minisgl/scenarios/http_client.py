"""The HTTP side of the server scenarios: a streaming chat completion or /generate read as SSE, as any client
would."""

from __future__ import annotations

import json
import time
from typing import Any, Callable

import httpx


def stream_chat(
    url: str,
    rid: str,
    question: str,
    max_tokens: int,
    leave_after: int | None = None,
    on_first: Callable[[], None] | None = None,
    model: str | None = None,
    extra: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    """POST /v1/chat/completions with stream=True; read every SSE message (or only `leave_after` of them,
    then close the connection as a client that goes away would). `on_first()` is called once the first
    message has arrived. `model`: the model id to send (SGLang's router forwards `unknown` without one);
    `extra`: more body fields, `headers`: HTTP headers (e.g. a data-parallel rank, chosen)."""
    body = {
        "messages": [{"role": "user", "content": question}],
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": True,
        "rid": rid,
        **({"model": model} if model is not None else {}),
        **(extra or {}),
    }
    text, chunks = "", 0
    with (
        httpx.Client(base_url=url, timeout=300) as client,
        client.stream("POST", "/v1/chat/completions", json=body, headers=headers or {}) as resp,
    ):
        if resp.status_code != 200:
            return {"rid": rid, "error": resp.read().decode()}
        for line in resp.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            delta = json.loads(line[6:])["choices"]
            text += (delta[0]["delta"].get("content") or "") if delta else ""
            chunks += 1
            if chunks == 1 and on_first is not None:
                on_first()
            if leave_after is not None and chunks >= leave_after:
                break
    return {"rid": rid, "text": text, "sse_messages": chunks}


def stream_generate(url: str, rid: str, text: str, max_new_tokens: int) -> dict:
    """POST /generate with "stream": true, read as SSE: each message holds the text so far."""
    body = {"rid": rid, "text": text, "stream": True,
            "sampling_params": {"max_new_tokens": max_new_tokens, "temperature": 0}}
    last, messages = None, 0
    with httpx.stream("POST", f"{url}/generate", json=body, timeout=300) as resp:
        if resp.status_code != 200:
            raise RuntimeError(f"{rid}: POST /generate answered {resp.status_code}: {resp.read()[:500]!r}")
        for line in resp.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                last, messages = json.loads(line[6:]), messages + 1
    if last is None:
        raise RuntimeError(f"{rid}: the stream ended without a message")
    return {"rid": rid, "text": last["text"], "output_ids": last.get("output_ids") or [],
            "finish_reason": last["meta_info"].get("finish_reason"), "sse_messages": messages}


def wait_load(url: str, done: Callable[[dict[str, Any]], bool], what: str, timeout: float = 120,
              poll: float = 0.1) -> dict[str, Any]:
    """Poll /health until `done(load)` holds for the scheduler's load; else raise, saying `what` was
    awaited."""
    deadline = time.monotonic() + timeout
    while True:
        resp = httpx.get(f"{url}/health", timeout=30)
        if resp.status_code != 200:  # e.g. the TokenizerManager no longer hears the scheduler's replies
            raise RuntimeError(f"GET /health answered {resp.status_code}: {resp.text[:500]}")
        load = resp.json()["load"]
        if done(load):
            return load
        if time.monotonic() > deadline:
            raise RuntimeError(f"after {timeout:.0f} s, {what}: {load}")
        time.sleep(poll)


def wait_idle(url: str, timeout: float = 120) -> dict[str, Any]:
    """Poll /health until nothing runs or waits (an aborted request has been let go)."""
    return wait_load(url, lambda load: load["num_running_reqs"] == 0 and load["num_waiting_reqs"] == 0,
                     "the server still has requests", timeout)
