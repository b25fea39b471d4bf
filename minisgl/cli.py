"""The `minisgl` command. Each subcommand lives in its own module; this file only wires them up."""

from __future__ import annotations

import argparse
import sys

from minisgl import __version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="minisgl",
        description="A compact SGLang-style LLM serving engine that you can trace and replay, on a CPU.",
    )
    parser.add_argument("--version", action="version", version=f"minisgl {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    from minisgl.entrypoints import (
        bench_cli,
        demo_cli,
        generate_cli,
        lab_cli,
        replay_cli,
        router_cli,
        scenario_cli,
        serve_cli,
        trace_cli,
    )

    generate_cli.register(sub)
    trace_cli.register(sub)
    replay_cli.register(sub)
    serve_cli.register(sub)
    router_cli.register(sub)
    demo_cli.register(sub)
    scenario_cli.register(sub)
    bench_cli.register(sub)
    lab_cli.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
