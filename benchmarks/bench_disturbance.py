"""Disturbance: do running streams and /health notice a huge body and a burst of bad requests?

    python benchmarks/bench_disturbance.py                    # 8 streams of 128 tokens, 20 MB body, 50 bad
    python benchmarks/bench_disturbance.py --streams 4 --max-tokens 64 --bad 20
    python benchmarks/bench_disturbance.py --large-prompt-kb 0   # without the large (allowed) prompt

Starts its own `minisgl serve` (the bundled model in float32, one torch thread, as the tests run it) and
runs the same workload twice:

- undisturbed: --streams concurrent streaming /v1/completions requests (greedy, ignore_eos, --max-tokens
  each), while /health is asked every 100 ms;
- disturbed: the same, and once every stream has its first token: one 20 MB body (a valid JSON prompt,
  sent with Content-Length), the same 20 MB sent chunked, a large prompt under the body limit that the
  tokenizer must read before the length check refuses it (--large-prompt-kb), and a burst of --bad bad
  requests at once (deep nesting, lone surrogates, invalid UTF-8, wrong types, text/plain and form bodies).

Printed side by side: inter-token latency over all streams (the gaps between one stream's consecutive
chunks) and /health latency, p50 / p95 / max, with the disturbed/undisturbed ratio; then what each
disturbing request got back and how long it took. Times are wall clock: on a loaded machine run it twice.
The server is whatever `minisgl` this Python imports (the current folder, or PYTHONPATH): run it from two
checkouts to compare them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter

import httpx

HEALTH_EVERY_S = 0.1
DEEP = b"[" * 100_000 + b"]" * 100_000
BAD_BODIES = [  # (content type, body)
    ("application/json", DEEP),
    ("application/json", b'{"rid": "\\ud800", "prompt": "\\ud800"}'),
    ("application/json", b'{"prompt": "\xff\xfe"}'),
    ("application/json", b'{"prompt": 5, "max_tokens": "many"}'),
    ("application/json", b"{not json"),
    ("text/plain", b'{"prompt": "hi"}'),
    ("application/x-www-form-urlencoded", b"prompt=hi"),
]
BAD_PATHS = ["/v1/completions", "/v1/chat/completions", "/generate", "/abort_request", "/flush_cache"]


def start_server(args: argparse.Namespace) -> tuple[subprocess.Popen, str]:
    cmd = [sys.executable, "-m", "minisgl.cli", "serve", "--port", "0", "--log-level", "warning",
           "--dtype", "float32", "--context-length", str(args.context_length)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    for line in proc.stdout:
        if m := re.search(r"ready at (http://\S+)", line):
            threading.Thread(target=proc.stdout.read, daemon=True).start()  # keep the pipe from filling
            return proc, m.group(1)
    raise SystemExit("minisgl serve did not start")


async def one_stream(c: httpx.AsyncClient, i: int, max_tokens: int, started: asyncio.Queue) -> list[float]:
    """Arrival times of one stream's token chunks."""
    body = {"prompt": f"Story number {i}: once upon a time", "max_tokens": max_tokens, "temperature": 0,
            "ignore_eos": True, "stream": True}
    times: list[float] = []
    async with c.stream("POST", "/v1/completions", json=body) as resp:
        resp.raise_for_status()
        async for line in resp.aiter_lines():
            if line.startswith("data: {") and json.loads(line[6:])["choices"][0]["text"]:
                times.append(time.perf_counter())
                if len(times) == 1:
                    started.put_nowait(i)
    return times


async def probe_health(c: httpx.AsyncClient, done: asyncio.Event) -> list[float]:
    latencies = []
    while not done.is_set():
        t = time.perf_counter()
        (await c.get("/health")).raise_for_status()
        latencies.append(time.perf_counter() - t)
        await asyncio.sleep(HEALTH_EVERY_S)
    return latencies


async def timed_post(c: httpx.AsyncClient, label: str, path: str, content, content_type: str
                     ) -> tuple[str, int | str, float]:
    t = time.perf_counter()
    try:
        status: int | str = (await c.post(path, content=content, headers={"content-type": content_type})).status_code
    except httpx.HTTPError as e:
        status = type(e).__name__
    return label, status, time.perf_counter() - t


async def disturb(url: str, args: argparse.Namespace) -> list[tuple[str, int | str, float]]:
    words = b"word " * (20 * 1024 * 1024 // 5)
    huge = b'{"prompt": "' + words[: 20 * 1024 * 1024 - 40] + b'", "max_tokens": 1}'

    async def chunked():  # no Content-Length: the server must count
        for start in range(0, len(huge), 1 << 20):
            yield huge[start:start + (1 << 20)]

    jobs = [("20 MB body, Content-Length", "/v1/completions", huge),
            ("20 MB body, chunked", "/v1/completions", chunked())]
    if args.large_prompt_kb:
        large = json.dumps({"prompt": "word " * (args.large_prompt_kb * 1024 // 5), "max_tokens": 1}).encode()
        jobs.append((f"{len(large) // 1024} KB prompt (too long)", "/v1/completions", large))
    limits = httpx.Limits(max_connections=args.bad + len(jobs) + 4)
    async with httpx.AsyncClient(base_url=url, timeout=600, limits=limits) as c:
        tasks = [timed_post(c, label, path, body, "application/json") for label, path, body in jobs]
        for k in range(args.bad):
            content_type, body = BAD_BODIES[k % len(BAD_BODIES)]
            tasks.append(timed_post(c, "bad", BAD_PATHS[k % len(BAD_PATHS)], body, content_type))
        return await asyncio.gather(*tasks)


async def run_phase(url: str, args: argparse.Namespace, disturbed: bool) -> dict:
    limits = httpx.Limits(max_connections=args.streams + 4)
    async with httpx.AsyncClient(base_url=url, timeout=600, limits=limits) as c:
        started: asyncio.Queue = asyncio.Queue()
        done = asyncio.Event()
        health = asyncio.create_task(probe_health(c, done))
        streams = [asyncio.create_task(one_stream(c, i, args.max_tokens, started)) for i in range(args.streams)]
        disturbance = []
        if disturbed:
            for _ in range(args.streams):
                await started.get()
            disturbance = await disturb(url, args)
        stream_times = await asyncio.gather(*streams)
        done.set()
        health_latencies = await health
    gaps = [b - a for times in stream_times for a, b in zip(times, times[1:])]
    return {"itl": gaps, "health": health_latencies, "disturbance": disturbance}


def stats(values: list[float]) -> tuple[float, float, float]:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
    return statistics.median(ordered), p95, ordered[-1]


def report(quiet: dict, loud: dict) -> None:
    print(f"\n{'':18}{'undisturbed':>13}{'disturbed':>13}{'ratio':>9}")
    for name, key in (("ITL", "itl"), ("/health", "health")):
        for label, a, b in zip(("p50", "p95", "max"), stats(quiet[key]), stats(loud[key])):
            print(f"{name + ' ' + label + ' (ms)':18}{a * 1000:13.1f}{b * 1000:13.1f}{b / a:8.1f}x")
    print(f"samples: ITL {len(quiet['itl'])} / {len(loud['itl'])}, /health {len(quiet['health'])} / "
          f"{len(loud['health'])}")
    print("\ndisturbance (status: count, slowest answer):")
    groups: dict[str, list[tuple[int | str, float]]] = {}
    for label, status, seconds in loud["disturbance"]:
        groups.setdefault(label, []).append((status, seconds))
    for label, answers in groups.items():
        counts = ", ".join(f"{s}: {n}" for s, n in sorted(Counter(s for s, _ in answers).items(), key=str))
        print(f"  {label:30} {counts:24} {max(t for _, t in answers) * 1000:8.0f} ms")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--streams", type=int, default=8)
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--bad", type=int, default=50, help="bad requests in the burst")
    p.add_argument("--large-prompt-kb", type=int, default=1024,
                   help="a prompt of about this size under the body limit, refused after tokenizing (0: none)")
    p.add_argument("--context-length", type=int, default=1024)
    args = p.parse_args()
    proc, url = start_server(args)
    try:
        print(f"server {url}: {args.streams} streams x {args.max_tokens} tokens; disturbance: 20 MB twice, "
              f"{args.large_prompt_kb} KB prompt, {args.bad} bad requests", flush=True)
        asyncio.run(run_phase(url, argparse.Namespace(**{**vars(args), "max_tokens": 8}), disturbed=False))  # warm-up
        quiet = asyncio.run(run_phase(url, args, disturbed=False))
        loud = asyncio.run(run_phase(url, args, disturbed=True))
        report(quiet, loud)
    finally:
        proc.send_signal(2)
        proc.wait(60)
    return 0


if __name__ == "__main__":
    sys.exit(main())
