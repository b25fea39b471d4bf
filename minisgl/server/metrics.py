"""TokenizerMetricsCollector: `GET /metrics` (with --enable-metrics) in Prometheus text format, under
SGLang's metric names (sglang/srt/metrics/collector.py) and its `model_name` label.

Two kinds of numbers:

- per request, observed in this process as the outputs arrive (the TokenizerManager calls three hooks:
  request_started, output_arrived, request_ended): token counters, time to first token, inter-token
  latency, end-to-end latency;
- about the engine, read from the scheduler at scrape time with GetLoadReq (refresh): running and queued
  requests, KV slots in use. The cache hit rate is computed here from the finished requests' usage.

The metrics live in their own CollectorRegistry, never prometheus_client's global one, so two apps in one
process (tests) do not collide.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI
from fastapi.responses import Response
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from minisgl.server.errors import RequestError

# SGLang's default buckets, in seconds
TTFT_BUCKETS = [0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400]
ITL_BUCKETS = [0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060, 0.080,
               0.100, 0.200, 0.400, 0.600, 0.800, 1.0, 2.0, 4.0, 6.0, 8.0]
E2E_BUCKETS = [0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600, 1200, 1800,
               2400]


@dataclass
class _Timing:
    """One running request: when it arrived, when its latest token did, and how many tokens it has."""

    created: float
    last: float | None = None  # None until the first output token
    tokens: int = 0


class TokenizerMetricsCollector:
    def __init__(self, model_name: str):
        self.registry = CollectorRegistry()
        self.labels = {"model_name": model_name}
        names, reg = list(self.labels), self.registry
        made: list = []

        def gauge(name: str, doc: str) -> Gauge:
            made.append(Gauge(name, doc, names, registry=reg))
            return made[-1]

        def counter(name: str, doc: str) -> Counter:
            made.append(Counter(name, doc, names, registry=reg))
            return made[-1]

        def histogram(name: str, doc: str, buckets: list[float]) -> Histogram:
            made.append(Histogram(name, doc, names, buckets=buckets, registry=reg))
            return made[-1]

        self.num_running_reqs = gauge("sglang:num_running_reqs", "The number of running requests.")
        self.num_queue_reqs = gauge("sglang:num_queue_reqs", "The number of requests in the waiting queue.")
        self.num_used_tokens = gauge("sglang:num_used_tokens", "The number of used tokens.")
        self.max_total_num_tokens = gauge("sglang:max_total_num_tokens",
                                          "Maximum total number of tokens in the KV cache pool.")
        self.token_usage = gauge("sglang:token_usage", "The token usage.")
        self.cache_hit_rate = gauge("sglang:cache_hit_rate", "The prefix cache hit rate.")
        self.prompt_tokens = counter("sglang:prompt_tokens", "Number of prefill tokens processed.")
        self.generation_tokens = counter("sglang:generation_tokens", "Number of generation tokens processed.")
        self.cached_tokens = counter("sglang:cached_tokens", "Number of cached prompt tokens.")
        self.num_requests = counter("sglang:num_requests", "Number of requests processed.")
        self.num_aborted_requests = counter("sglang:num_aborted_requests", "Number of requests aborted.")
        self.time_to_first_token = histogram("sglang:time_to_first_token_seconds",
                                             "Histogram of time to first token in seconds.", TTFT_BUCKETS)
        self.inter_token_latency = histogram("sglang:inter_token_latency_seconds",
                                             "Histogram of inter-token latency in seconds.", ITL_BUCKETS)
        self.e2e_request_latency = histogram("sglang:e2e_request_latency_seconds",
                                             "Histogram of End-to-end request latency in seconds",
                                             E2E_BUCKETS)
        for metric in made:
            metric.labels(**self.labels)  # every series shows (at 0) before the first request
        self._timings: dict[str, _Timing] = {}
        self._prompt_sum = self._cached_sum = 0  # over finished requests: the cache hit rate

    # ---- the TokenizerManager's hooks -------------------------------------------------------------
    def request_started(self, rid: str) -> None:
        self._timings[rid] = _Timing(time.perf_counter())

    def output_arrived(self, rid: str, meta_info: dict[str, Any], finished: bool) -> None:
        """A piece of `rid`'s output reached its waiter; meta_info has the running token counts."""
        timing = self._timings.get(rid)
        if timing is None:
            return
        now = time.perf_counter()
        new = meta_info["completion_tokens"] - timing.tokens
        if new > 0:
            if timing.last is None:  # the first piece: its wait is the time to first token (as in SGLang)
                self.time_to_first_token.labels(**self.labels).observe(now - timing.created)
            else:  # a later piece of several tokens: each gets its share of the gap
                for _ in range(new):
                    self.inter_token_latency.labels(**self.labels).observe((now - timing.last) / new)
            timing.last, timing.tokens = now, meta_info["completion_tokens"]
        if finished:
            del self._timings[rid]
            self._finished(meta_info, now - timing.created)

    def request_ended(self, rid: str) -> None:
        """The waiter is gone (however it ended): a request that never finished counts as aborted."""
        if self._timings.pop(rid, None) is not None:
            self.num_aborted_requests.labels(**self.labels).inc()

    def _finished(self, meta_info: dict[str, Any], e2e: float) -> None:
        labels = self.labels
        prompt, cached = meta_info["prompt_tokens"], meta_info["cached_tokens"]
        self.prompt_tokens.labels(**labels).inc(prompt)
        self.generation_tokens.labels(**labels).inc(meta_info["completion_tokens"])
        self.cached_tokens.labels(**labels).inc(cached)
        self.num_requests.labels(**labels).inc()
        self.e2e_request_latency.labels(**labels).observe(e2e)
        reason = meta_info.get("finish_reason") or {}
        if reason.get("type") == "abort":
            self.num_aborted_requests.labels(**labels).inc()
        self._prompt_sum += prompt
        self._cached_sum += cached

    # ---- a scrape ---------------------------------------------------------------------------------
    async def refresh(self, tokenizer_manager) -> None:
        """Set the engine's gauges from the scheduler's load; if it cannot answer, they keep their values."""
        try:
            load = await tokenizer_manager.get_load(timeout=5.0)
        except RequestError:
            return
        used = load.total_slots - load.free_slots - load.cached_slots
        labels = self.labels
        self.num_running_reqs.labels(**labels).set(load.num_running_reqs)
        self.num_queue_reqs.labels(**labels).set(load.num_waiting_reqs)
        self.num_used_tokens.labels(**labels).set(used)
        self.max_total_num_tokens.labels(**labels).set(load.total_slots)
        self.token_usage.labels(**labels).set(used / load.total_slots if load.total_slots else 0.0)
        self.cache_hit_rate.labels(**labels).set(self._cached_sum / self._prompt_sum if self._prompt_sum
                                                 else 0.0)

    def render(self) -> bytes:
        return generate_latest(self.registry)


def add_metrics_route(app: FastAPI, collector: TokenizerMetricsCollector, tokenizer_manager) -> None:
    """GET /metrics, without the API key, like /health (SGLang leaves both open for scrapers and probes)."""

    @app.get("/metrics")
    async def metrics() -> Response:
        await collector.refresh(tokenizer_manager)
        return Response(collector.render(), media_type=CONTENT_TYPE_LATEST)
