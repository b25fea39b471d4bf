"""`minisgl bench serve --url URL`: load an OpenAI-compatible server with N streaming requests, C at a time,
and print TTFT, inter-token latency, end-to-end latency (p50/p99) and output tokens per second."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="benchmarks (serve: load an OpenAI-compatible server)",
                       description="Benchmarks. `minisgl bench serve --url URL` loads any OpenAI-compatible "
                                   "server.")
    bench_sub = p.add_subparsers(dest="bench_command", metavar="BENCHMARK", required=True)
    s = bench_sub.add_parser(
        "serve", help="streaming requests against an OpenAI-compatible server",
        description="Send N streaming /v1/completions requests, C at a time, and report TTFT, ITL and "
                    "end-to-end latency (p50/p99) and output tokens/s. Works against any OpenAI-compatible "
                    "server.",
    )
    s.add_argument("--url", required=True, help="the server's base URL, e.g. http://127.0.0.1:30000")
    s.add_argument("--num-prompts", type=int, default=32, help="requests to send (default 32)")
    s.add_argument("--concurrency", type=int, default=1, help="requests in flight at once (default 1)")
    s.add_argument("--dataset", choices=["random", "shared-prefix"], default="random",
                   help="random word prompts, or one long shared preamble + a short question (default "
                        "random)")
    s.add_argument("--max-tokens", type=int, default=64, help="output tokens per request (default 64)")
    s.add_argument("--input-len", type=int, default=64, help="words per random prompt (default 64)")
    s.add_argument("--seed", type=int, default=0, help="seed for the random prompts")
    s.add_argument("--model", default=None, help="model id to send (default: the first of GET /v1/models)")
    s.add_argument("--api-key", default=None, help="sent as 'Authorization: Bearer KEY'")
    s.add_argument("--json", action="store_true", help="also print the figures as one JSON line")
    s.set_defaults(func=run_serve)


def run_serve(args: argparse.Namespace) -> int:
    import httpx
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from minisgl.entrypoints.bench_serving import make_prompts, run_benchmark, summarize

    console = Console()
    url = args.url.rstrip("/").removesuffix("/v1")
    headers = {"Authorization": f"Bearer {args.api_key}"} if args.api_key else {}
    try:
        model = (args.model
                 or httpx.get(f"{url}/v1/models", headers=headers, timeout=30).json()["data"][0]["id"])
    except (httpx.HTTPError, KeyError, IndexError, ValueError) as e:
        print(f"minisgl bench serve: error: cannot list models at {url}/v1/models: {e}", file=sys.stderr)
        return 2
    prompts = make_prompts(args.dataset, args.num_prompts, args.input_len, args.seed)
    console.print(f"[bold]{url}[/] model [bold]{model}[/]: {args.num_prompts} requests, concurrency "
                  f"{args.concurrency}, dataset {args.dataset}, max_tokens {args.max_tokens}")
    with Progress(TextColumn("requests"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console) as progress:
        task = progress.add_task("requests", total=len(prompts))
        results, wall = asyncio.run(run_benchmark(url, model, prompts, args.concurrency, args.max_tokens,
                                                  headers, on_done=lambda r: progress.advance(task)))
    stats = summarize(results, wall)
    _print_table(console, stats)
    for r in [r for r in results if not r.ok][:3]:
        console.print(f"[red]failed:[/] {r.error}")
    if args.json:
        print(json.dumps({"url": url, "model": model, "concurrency": args.concurrency,
                          "dataset": args.dataset, "num_prompts": args.num_prompts,
                          "max_tokens": args.max_tokens, **stats}))
    return 0 if stats["failed"] == 0 else 1


def _print_table(console, stats: dict[str, float]) -> None:
    from rich.table import Table

    table = Table(show_header=True, header_style="bold")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_row("completed / failed", f"{stats['completed']} / {stats['failed']}")
    table.add_row("duration", f"{stats['duration_s']:.2f} s")
    table.add_row("output tokens (mean per request)",
                  f"{stats['output_tokens']} ({stats['mean_output_tokens']:.1f})")
    table.add_row("output throughput", f"{stats['output_tok_per_s']:.1f} tok/s")
    table.add_row("request throughput", f"{stats['req_per_s']:.2f} req/s")
    for name, key in (("TTFT", "ttft"), ("ITL", "itl"), ("end-to-end", "e2e")):
        table.add_row(f"{name} p50 / p99", f"{stats[key + '_p50_ms']:.1f} / {stats[key + '_p99_ms']:.1f} ms")
    console.print(table)
