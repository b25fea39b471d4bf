"""The serving benchmark's engine room: prompts, one streaming client, and the latency figures.

It speaks plain OpenAI /v1/completions over HTTP (httpx, SSE), so it measures any OpenAI-compatible server
the same way: minisgl, llama.cpp's, vLLM's, SGLang's.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

WORDS = [
    "time", "person", "year", "way", "day", "thing", "man", "world", "life", "hand", "part", "child", "eye",
    "woman", "place", "work", "week", "case", "point", "government", "company", "number", "group", "problem",
    "fact", "river", "mountain", "city", "music", "garden", "window", "story", "market", "science",
    "language", "history", "water", "light", "color", "animal", "winter", "summer", "morning", "evening",
    "table", "letter",
]

SHARED_PREFIX = (
    "You are a helpful assistant for a small public library. The library opens at nine in the morning and "
    "closes at six in the evening, except on Sundays when it is closed. Members may borrow up to five books "
    "for three weeks; a renewal adds two weeks if nobody else has reserved the book. Late returns cost ten "
    "cents a day. The reading room on the second floor is quiet; group study rooms can be booked at the "
    "front desk for two hours at a time. Answer the question below in one or two sentences.\n\n"
)


def make_prompts(dataset: str, num_prompts: int, input_len: int, seed: int) -> list[str]:
    """random: independent word salads of about input_len words; shared-prefix: one long common preamble
    (what a radix cache can reuse) followed by a short distinct question."""
    rng = random.Random(seed)
    if dataset == "random":
        return [" ".join(rng.choice(WORDS) for _ in range(input_len)) for _ in range(num_prompts)]
    if dataset == "shared-prefix":
        return [f"{SHARED_PREFIX}Question {i}: what about the {rng.choice(WORDS)} and the "
                f"{rng.choice(WORDS)}?\nAnswer:" for i in range(num_prompts)]
    raise ValueError(f"unknown dataset {dataset!r}: random or shared-prefix")


@dataclass
class RequestResult:
    ok: bool
    error: str = ""
    start: float = 0.0
    ttft: float = 0.0  # seconds to the first text
    latency: float = 0.0  # seconds to the last byte
    chunk_times: list[float] = field(default_factory=list)  # arrival of each chunk that carried text
    output_tokens: int = 0  # from usage when the server sends it, else the number of text chunks


async def length_fields(client: httpx.AsyncClient, url: str, model: str, headers: dict[str, str]) -> dict:
    """ignore_eos (SGLang, vLLM, minisgl) or min_tokens (llama.cpp) make every request run max_tokens long.
    A server that refuses min_tokens by name (minisgl does: it has no such sampling option) gets only
    ignore_eos; one 1-token request asks."""
    fields = {"ignore_eos": True, "min_tokens": 1}
    body = {"model": model, "prompt": "Hi", "max_tokens": 1, "temperature": 0, **fields}
    resp = await client.post(f"{url}/v1/completions", json=body, headers=headers)
    if resp.status_code == 400 and "min_tokens" in resp.text:
        del fields["min_tokens"]
    return fields


async def send_one(client: httpx.AsyncClient, url: str, model: str, prompt: str, max_tokens: int,
                   headers: dict[str, str], fields: dict) -> RequestResult:
    length = {k: (max_tokens if k == "min_tokens" else v) for k, v in fields.items()}
    body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}, **length}
    result = RequestResult(ok=False, start=time.perf_counter())
    usage_tokens = None
    try:
        async with client.stream("POST", f"{url}/v1/completions", json=body, headers=headers) as resp:
            if resp.status_code != 200:
                result.error = f"HTTP {resp.status_code}: {(await resp.aread())[:200]!r}"
                return result
            async for line in resp.aiter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                data = json.loads(line[6:])
                if data.get("usage"):
                    usage_tokens = data["usage"].get("completion_tokens")
                if any(c.get("text") for c in data.get("choices") or []):
                    result.chunk_times.append(time.perf_counter())
    except (httpx.HTTPError, json.JSONDecodeError) as e:
        result.error = f"{type(e).__name__}: {e}"
        return result
    end = time.perf_counter()
    result.ok = bool(result.chunk_times)
    result.error = "" if result.ok else "no text came back"
    result.ttft = result.chunk_times[0] - result.start if result.chunk_times else 0.0
    result.latency = end - result.start
    result.output_tokens = usage_tokens if usage_tokens else len(result.chunk_times)
    return result


async def run_benchmark(url: str, model: str, prompts: list[str], concurrency: int, max_tokens: int,
                        headers: dict[str, str],
                        on_done: Callable[[RequestResult], None]) -> tuple[list, float]:
    """All prompts, at most `concurrency` in flight. Returns the results and the wall time in seconds."""
    gate = asyncio.Semaphore(concurrency)
    timeout = httpx.Timeout(connect=10, read=600, write=60, pool=None)
    async with httpx.AsyncClient(timeout=timeout,
                                 limits=httpx.Limits(max_connections=concurrency + 4)) as client:
        fields = await length_fields(client, url, model, headers)

        async def one(prompt: str) -> RequestResult:
            async with gate:
                result = await send_one(client, url, model, prompt, max_tokens, headers, fields)
            on_done(result)
            return result

        t0 = time.perf_counter()
        results = await asyncio.gather(*(one(p) for p in prompts))
        return list(results), time.perf_counter() - t0


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = (len(ordered) - 1) * q / 100
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def summarize(results: list[RequestResult], wall: float) -> dict[str, float]:
    ok = [r for r in results if r.ok]
    itls = [b - a for r in ok for a, b in zip(r.chunk_times, r.chunk_times[1:])]
    out_tokens = sum(r.output_tokens for r in ok)
    ms = 1000.0
    return {
        "completed": len(ok),
        "failed": len(results) - len(ok),
        "duration_s": wall,
        "output_tokens": out_tokens,
        "mean_output_tokens": out_tokens / len(ok) if ok else 0.0,
        "output_tok_per_s": out_tokens / wall if wall > 0 else 0.0,
        "req_per_s": len(ok) / wall if wall > 0 else 0.0,
        "ttft_p50_ms": percentile([r.ttft for r in ok], 50) * ms,
        "ttft_p99_ms": percentile([r.ttft for r in ok], 99) * ms,
        "itl_p50_ms": percentile(itls, 50) * ms,
        "itl_p99_ms": percentile(itls, 99) * ms,
        "e2e_p50_ms": percentile([r.latency for r in ok], 50) * ms,
        "e2e_p99_ms": percentile([r.latency for r in ok], 99) * ms,
    }
