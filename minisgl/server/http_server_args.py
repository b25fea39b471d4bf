"""HttpServerArgs: the flags only `minisgl serve` has (SGLang keeps them in ServerArgs; the offline Engine
and `minisgl generate` have no use for a port, so here they live apart)."""

from __future__ import annotations

import argparse
import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path

LOG_LEVELS = ["debug", "info", "warning", "error", "critical"]


@dataclass
class HttpServerArgs:
    host: str = "127.0.0.1"
    port: int = 30000  # 0: any free port (the ready line says which)
    api_key: str | None = None  # when set, every endpoint but /health wants "Authorization: Bearer KEY"
    log_level: str = "info"
    served_model_name: str | None = None  # None: the model file's or folder's name
    trace_dir: str | None = None  # None: no tracing; "": a new timestamped folder in the working folder
    trace_level: int = 2
    graceful_shutdown_timeout: float = 30.0  # after SIGTERM/SIGINT: seconds running requests may still finish
    enable_metrics: bool = False  # GET /metrics in Prometheus text format

    def resolve_trace_dir(self) -> Path | None:
        """Pick the folder once, in the main process; every child is given the same path."""
        if self.trace_dir is None:
            return None
        if self.trace_dir == "":
            self.trace_dir = str(Path.cwd() / f"minisgl-trace-{time.strftime('%Y%m%d-%H%M%S')}")
        return Path(self.trace_dir).resolve()

    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser) -> None:
        d = HttpServerArgs()
        g = parser.add_argument_group("HTTP server")
        g.add_argument("--host", default=d.host, help=f"address to listen on (default {d.host})")
        g.add_argument("--port", type=int, default=d.port, help=f"port to listen on; 0 picks a free one "
                                                                   f"(default {d.port})")
        g.add_argument("--api-key", default=d.api_key,
                       help="require 'Authorization: Bearer KEY' on every endpoint except /health")
        g.add_argument("--log-level", default=d.log_level, choices=LOG_LEVELS, help="log level of every process")
        g.add_argument("--served-model-name", default=d.served_model_name,
                       help="the model id clients send and /v1/models lists (default: the model's name)")
        g.add_argument("--graceful-shutdown-timeout", type=float, default=d.graceful_shutdown_timeout,
                       metavar="SECONDS",
                       help="on SIGTERM or SIGINT, refuse new requests (503) and give running ones this long to "
                            "finish; the rest end with an error, then the server exits. A second signal stops "
                            f"at once (default {d.graceful_shutdown_timeout:g})")
        g.add_argument("--enable-metrics", action="store_true",
                       help="serve GET /metrics in Prometheus text format (SGLang's sglang:* metric names)")
        g = parser.add_argument_group("tracing")
        g.add_argument("--trace", dest="trace_dir", nargs="?", const="", default=None, metavar="DIR",
                       help="write a trace of every process to DIR (default: ./minisgl-trace-YYYYmmdd-HHMMSS)")
        g.add_argument("--trace-level", type=int, default=d.trace_level, choices=[1, 2, 3],
                       help="1 requests and rounds, 2 adds per-token events, 3 adds per-row tensors (default 2)")

    @classmethod
    def from_cli_args(cls, args: argparse.Namespace) -> HttpServerArgs:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in vars(args).items() if k in names})
