"""Prefill/decode disaggregation behind SGLang's own router in its PD mode (sglang-router --pd-disaggregation).

One `minisgl router --pd-disaggregation` for the module: a float32 prefill server and a float32 decode server
behind the real router. Every answer (chat, streamed chat, /generate, several at once) must equal the
offline Engine's greedy text; both servers' traces, and their merge, must pass `trace check`, the merge must
replay and draw one request's lifecycle across both servers; every KV slot must come back, nothing may be
left running. Skipped, saying so, without .venv-router (`make router-env`).
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.server.conftest import replay_opens_to_the_end
from tests.server.test_router import WORKER_FLAGS, Launch, _alive, require_router
from tracer.check import check_trace
from tracer.reader import load_trace
from tracer.servers import merge_traces, pick_server

pytestmark = pytest.mark.slow

MODEL = "SmolLM2-135M-Instruct.Q4_1"
GREEDY = {"max_new_tokens": 12, "temperature": 0}
CHAT = [{"role": "user", "content": "What is the capital of China?"}]
TEXTS = ["The capital of France is", "List three prime numbers:", "Once upon a time"]


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    require_router()
    trace_dir = tmp_path_factory.mktemp("pd-trace")
    launch = Launch(["--pd-disaggregation", "--policy", "round_robin", "--trace", str(trace_dir),
                     *WORKER_FLAGS]).wait_ready()
    launch.trace_dir = trace_dir
    yield launch
    if launch.proc.poll() is None:
        launch.stop()


def test_a_pd_pair_serves_the_engines_greedy_text_and_its_traces_meet(pair, engine, tmp_path):
    from openai import OpenAI

    prefill_url, decode_url = pair.workers[0][0], pair.workers[1][0]
    assert "prefill" in pair.output() and f"decode {decode_url}" in pair.output()
    assert httpx.get(f"{prefill_url}/server_info").json()["disaggregation_mode"] == "prefill"
    client = OpenAI(base_url=f"{pair.url}/v1", api_key="none", max_retries=0, timeout=300)
    reference = engine.generate(CHAT, GREEDY)["text"]

    reply = client.chat.completions.create(model=MODEL, messages=CHAT, temperature=0,
                                           max_tokens=GREEDY["max_new_tokens"])
    assert reply.choices[0].message.content == reference
    assert reply.id.startswith("chatcmpl-pd-")  # the rid both halves share: pd-<bootstrap room>
    stream = client.chat.completions.create(model=MODEL, messages=CHAT, temperature=0, stream=True,
                                            max_tokens=GREEDY["max_new_tokens"])
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == reference

    def generate(text: str) -> str:
        r = httpx.post(f"{pair.url}/generate", json={"text": text, "sampling_params": GREEDY}, timeout=300)
        assert r.status_code == 200, r.text
        return r.json()["text"]

    with ThreadPoolExecutor(len(TEXTS)) as pool:  # at once: batched on both servers
        assert list(pool.map(generate, TEXTS)) == [engine.generate(t, GREEDY)["text"] for t in TEXTS]

    # a client that leaves mid-stream: the decode server aborts the request and gives its KV back
    stream = client.chat.completions.create(model=MODEL, messages=CHAT, temperature=0, stream=True, max_tokens=64,
                                            extra_body={"ignore_eos": True})
    assert sum(1 for _, _ in zip(stream, range(3))) == 3
    stream.close()

    # straight to the decode server, without the router's bootstrap fields: refused, nothing held
    alone = httpx.post(f"{decode_url}/generate", json={"text": "Hi", "sampling_params": GREEDY}, timeout=60)
    assert alone.status_code == 400 and "sglang-router --pd-disaggregation" in alone.json()["error"]["message"]

    # every KV slot is back: the decode server holds none, the prefill server's radix tree keeps the prompts
    for url, cached in ((decode_url, False), (prefill_url, True)):
        load = _idle_load(url)
        assert load["num_running_reqs"] == load["num_waiting_reqs"] == 0
        assert load["free_slots"] + load["cached_slots"] == load["total_slots"]
        assert (load["cached_slots"] > 0) == cached

    descendants = pair.descendants
    assert pair.stop() == 0, pair.output()[-3000:]
    assert _alive(descendants) == []  # both servers, their engine processes and the router are gone

    prefill, decode = pair.trace_dir / "prefill", pair.trace_dir / "decode"
    assert check_trace(load_trace(prefill)) == []
    decode_trace = load_trace(decode)
    assert check_trace(decode_trace) == []
    finished = [ev.get("finish_reason")["type"] for ev in decode_trace.events if ev.name == "sched.finished"]
    assert finished.count("abort") == 1 and len(finished) == 6  # the client that left, and the five others
    merge_traces([prefill, decode], ["prefill", "decode"], tmp_path / "merged")
    merged = load_trace(tmp_path / "merged")
    assert check_trace(merged) == []
    sent = [ev for ev in merged.events if ev.name == "disagg.kv_sent"]
    received = {ev.get("room"): ev for ev in merged.events if ev.name == "disagg.kv_received"}
    assert len(sent) == len(received) == 6 and all(ev.proc == "prefill/scheduler" for ev in sent)
    assert all(received[ev.get("room")].get("nbytes") == ev.get("nbytes") > 0 for ev in sent)

    _lifecycle_spans_both_servers(merged, sent[0].rid)
    replay_opens_to_the_end(pick_server(merged, "decode"))
    _a_lost_byte_is_caught(tmp_path / "merged", tmp_path / "tampered")


def _idle_load(url: str, timeout: float = 120) -> dict:
    """The server's load once nothing runs (an abort reaches the scheduler a moment after the client left)."""
    deadline = time.monotonic() + timeout
    while True:
        load = httpx.get(f"{url}/health").json()["load"]
        if load["num_running_reqs"] == load["num_waiting_reqs"] == 0 or time.monotonic() > deadline:
            return load
        time.sleep(0.2)


def _lifecycle_spans_both_servers(merged, rid: str) -> None:
    from tracer.diagrams import render_diagram

    text = render_diagram(merged, "lifecycle", "mermaid", rid=rid)
    assert "participant prefill_S as prefill: Scheduler" in text and "participant decode_S as decode: Scheduler" in text
    assert "prefill_S->>decode_S: KV rows + first token" in text




def _a_lost_byte_is_caught(merged: Path, tampered: Path) -> None:
    """The merged check compares each room's KV sent with the KV received: one byte fewer is a failure."""
    tampered.mkdir()
    done = False
    for path in merged.glob("*.jsonl"):
        records = [json.loads(line) for line in path.read_text().splitlines()]
        for record in records:
            if record["name"] == "disagg.kv_received" and not done:
                record["attrs"]["nbytes"] -= 1
                done = True
        (tampered / path.name).write_text("".join(json.dumps(r) + "\n" for r in records))
    failures = check_trace(load_trace(tampered))
    assert len(failures) == 1 and "nbytes sent" in failures[0], failures
