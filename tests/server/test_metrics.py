"""GET /metrics (the session server runs with --enable-metrics): Prometheus text under SGLang's names, read
with prometheus_client's own parser. Counters grow by exactly the usage the responses reported, the latency
histograms count each request, and the gauges show a request while it streams."""

from __future__ import annotations

import json

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.server.conftest import AUTH, wait_drained

COUNTERS = ("sglang:prompt_tokens_total", "sglang:generation_tokens_total", "sglang:cached_tokens_total",
            "sglang:num_requests_total")
HISTOGRAMS = ("sglang:time_to_first_token_seconds", "sglang:inter_token_latency_seconds",
              "sglang:e2e_request_latency_seconds")
GAUGES = ("sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:token_usage", "sglang:cache_hit_rate",
          "sglang:num_used_tokens", "sglang:max_total_num_tokens")


def scrape(server, model: str) -> dict[str, float]:
    """Every sample of the served model (its `model_name` label), by sample name; /metrics needs no API key."""
    resp = httpx.get(f"{server.url}/metrics", timeout=60)
    assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/plain")
    samples = {}
    for family in text_string_to_metric_families(resp.text):
        for s in family.samples:
            if s.labels.get("model_name") == model and "le" not in s.labels:
                samples[s.name] = s.value
    return samples


def test_metrics_count_tokens_requests_and_latencies_and_show_a_running_request(server, http, model):
    wait_drained(http)  # nothing left over from other tests changes the counters under us
    before = scrape(server, model)
    assert set(COUNTERS + GAUGES) <= set(before)
    assert {f"{h}_count" for h in HISTOGRAMS} <= set(before)
    usages = []
    body = {"model": model, "prompt": "The capital of France is", "max_tokens": 12, "ignore_eos": True,
            "temperature": 0}
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=300) as c, \
            c.stream("POST", "/v1/completions", json={**body, "stream": True,
                                                      "stream_options": {"include_usage": True}}) as resp:
        lines = resp.iter_lines()
        while not next(lines).startswith("data: {"):
            pass
        during = scrape(server, model)  # a token is out, eleven to come
        assert during["sglang:num_running_reqs"] >= 1
        assert 0 < during["sglang:token_usage"] <= 1 and during["sglang:num_used_tokens"] > 0
        chunks = [json.loads(line[6:]) for line in lines if line.startswith("data: {")]
    usages.append(chunks[-1]["usage"])
    for _ in range(2):  # the same prompt twice: the second reuses the first's cached prefix
        out = http.post("/v1/completions", json={**body, "max_tokens": 4})
        assert out.status_code == 200
        usages.append(out.json()["usage"])
    after = scrape(server, model)

    def grew(name: str) -> float:
        return after[name] - before[name]

    assert grew("sglang:prompt_tokens_total") == sum(u["prompt_tokens"] for u in usages)
    assert grew("sglang:generation_tokens_total") == sum(u["completion_tokens"] for u in usages)
    cached = sum(u["prompt_tokens_details"]["cached_tokens"] for u in usages)
    assert grew("sglang:cached_tokens_total") == cached > 0
    assert grew("sglang:num_requests_total") == 3
    assert grew("sglang:time_to_first_token_seconds_count") == 3
    assert grew("sglang:e2e_request_latency_seconds_count") == 3
    # the stream gets one token per round: each after its first is one inter-token gap; a non-streaming
    # request's output arrives once, at the end (as in SGLang): it adds a first token and no gap
    assert grew("sglang:inter_token_latency_seconds_count") == usages[0]["completion_tokens"] - 1
    assert grew("sglang:e2e_request_latency_seconds_sum") > 0
    assert after["sglang:num_running_reqs"] == 0 and after["sglang:num_queue_reqs"] == 0
    assert after["sglang:max_total_num_tokens"] == http.get("/health").json()["load"]["total_slots"]
    assert after["sglang:cache_hit_rate"] == (after["sglang:cached_tokens_total"]
                                              / after["sglang:prompt_tokens_total"])
