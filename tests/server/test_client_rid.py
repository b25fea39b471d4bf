"""SGLang's `rid` extension on the OpenAI endpoints: the client names its request, and that name is the
request's id everywhere (the response id, every trace event), as the scenarios and lessons rely on."""

from __future__ import annotations

import time

from tests.server.conftest import wait_drained
from tracer.reader import load_trace


def test_chat_completion_keeps_the_clients_rid(client, model, server, http):
    reply = client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "Hi"}],
        max_tokens=2,
        temperature=0,
        extra_body={"rid": "lesson-chat-R1"},
    )
    assert reply.id == "chatcmpl-lesson-chat-R1"
    wait_drained(http)
    deadline = time.monotonic() + 30
    while True:  # the processes write their files on their own schedules: wait for the last event
        names = [ev.name for ev in load_trace(server.trace_dir).by_rid("lesson-chat-R1")]
        if "http.response_finished" in names or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert names[0] == "http.request_received"
    assert {"sched.req_created", "sched.finished", "detok.decoded", "http.response_finished"} <= set(names)


def test_completion_keeps_the_clients_rid(client, model):
    reply = client.completions.create(
        model=model, prompt="Once upon", max_tokens=2, temperature=0, extra_body={"rid": "lesson-cmpl-R2"}
    )
    assert reply.id == "cmpl-lesson-cmpl-R2"


def test_an_empty_rid_is_refused(http, model):
    resp = http.post(
        "/v1/chat/completions",
        json={"model": model, "rid": "", "max_tokens": 1, "messages": [{"role": "user", "content": "Hi"}]},
    )
    assert resp.status_code == 400
    assert resp.json()["error"]["param"] == "rid"
