"""`minisgl serve`: the OpenAI-compatible HTTP server (main process + scheduler + detokenizer processes)."""

from __future__ import annotations

import argparse
import sys

from minisgl.server_args import ServerArgs


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "serve",
        help="run the OpenAI-compatible HTTP server",
        description="Serve the model over HTTP: /v1/chat/completions, /v1/completions, /generate, "
                    "/v1/models, /health, /flush_cache and /abort_request, and what SGLang's router asks of "
                    "a worker (/server_info, /model_info, /get_load, /health_generate). Ctrl-C stops every "
                    "process.",
    )
    from minisgl.server.http_server_args import HttpServerArgs

    HttpServerArgs.add_cli_args(p)
    ServerArgs.add_cli_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from minisgl.configs.model_config import UnsupportedModel
    from minisgl.labs.swap import LabSwapError, apply_from_env
    from minisgl.model_loader.bundled import ModelNotFound
    from minisgl.server.http_server_args import HttpServerArgs
    from minisgl.server.server_lifecycle import launch_server

    server_args = ServerArgs.from_cli_args(args)
    http_args = HttpServerArgs.from_cli_args(args)
    try:
        server_args.validate()
        http_args.validate(server_args.disaggregation_mode)
        apply_from_env()  # a lab's component (MINISGL_LAB): checked here, before any child process starts
        return launch_server(server_args, http_args)
    except (ModelNotFound, UnsupportedModel, ValueError, LabSwapError) as e:
        print(f"minisgl serve: error: {e}", file=sys.stderr)
        return 2
