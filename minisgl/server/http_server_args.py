"""HttpServerArgs: the flags only `minisgl serve` has (SGLang keeps them in ServerArgs; the offline Engine
and `minisgl generate` have no use for a port, so here they live apart)."""

from __future__ import annotations

import argparse
import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path

LOG_LEVELS = ["debug", "info", "warning", "error", "critical"]
# The largest useful body is a prompt that fills the context. A 128k-token context (the largest models
# minisgl's kind of server runs) is about 512 KB of English text, about 1 MB as input_ids ("12345, " per
# token), and at worst about 1.5 MB as JSON-escaped non-Latin text (~1.5 characters per token, 6 bytes
# per "\uXXXX"). 4 MiB leaves more than twice that; the bundled SmolLM2's 8k context needs under 100 KB.
# Past it nothing can fit, and the tokenizer would spend seconds per MB finding that out.
DEFAULT_MAX_REQUEST_BODY_BYTES = 4 * 1024 * 1024


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
    max_request_body_bytes: int = DEFAULT_MAX_REQUEST_BODY_BYTES  # larger bodies get 413
    allowed_origins: list[str] | None = None  # None: no CORS headers at all, so browsers keep other sites out
    tool_call_parser: str | None = None  # qwen25 | hermes | pythonic: tool calls parsed out of chat answers
    reasoning_parser: str | None = None  # deepseek-r1 | qwen3: <think> blocks into reasoning_content
    tokenizer_worker_num: int = 1  # HTTP server processes, each with its own TokenizerManager, on one port

    def resolve_trace_dir(self) -> Path | None:
        """Pick the folder once, in the main process; every child is given the same path."""
        if self.trace_dir is None:
            return None
        if self.trace_dir == "":
            self.trace_dir = str(Path.cwd() / f"minisgl-trace-{time.strftime('%Y%m%d-%H%M%S')}")
        return Path(self.trace_dir).resolve()

    def validate(self, disaggregation_mode: str = "null") -> None:
        """The flags that cannot go together; ValueError names them."""
        if self.tokenizer_worker_num > 1 and self.enable_metrics:
            raise ValueError("--enable-metrics counts in one process: with --tokenizer-worker-num > 1 each "
                             "worker would report only its own requests; use one flag or the other")
        if self.tokenizer_worker_num > 1 and disaggregation_mode != "null":
            raise ValueError("--tokenizer-worker-num > 1 is not supported with --disaggregation-mode "
                             f"{disaggregation_mode}: a PD server runs one TokenizerManager")

    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser) -> None:
        d = HttpServerArgs()
        g = parser.add_argument_group("HTTP server")
        g.add_argument("--host", default=d.host, help=f"address to listen on (default {d.host})")
        g.add_argument("--port", type=int, default=d.port, help=f"port to listen on; 0 picks a free one "
                                                                   f"(default {d.port})")
        g.add_argument("--api-key", default=d.api_key,
                       help="require 'Authorization: Bearer KEY' on every endpoint except /health")
        g.add_argument("--log-level", default=d.log_level, choices=LOG_LEVELS,
                       help="log level of every process")
        g.add_argument("--served-model-name", default=d.served_model_name,
                       help="the model id clients send and /v1/models lists (default: the model's name)")
        g.add_argument("--graceful-shutdown-timeout", type=float, default=d.graceful_shutdown_timeout,
                       metavar="SECONDS",
                       help="on SIGTERM or SIGINT, refuse new requests (503) and give running ones this long "
                            "to finish; the rest end with an error, then the server exits. A second signal "
                            f"stops at once (default {d.graceful_shutdown_timeout:g})")
        g.add_argument("--enable-metrics", action="store_true",
                       help="serve GET /metrics in Prometheus text format (SGLang's sglang:* metric names)")
        g.add_argument("--max-request-body-bytes", type=_positive_int, default=d.max_request_body_bytes,
                       metavar="N", help="answer 413 to a request body over N bytes, before reading it when "
                       "Content-Length says so (default %(default)s = 4 MiB: room for a 128k-token prompt)")
        g.add_argument("--allowed-origins", nargs="+", default=d.allowed_origins, metavar="URL",
                       help="let web pages from these origins (e.g. http://localhost:8080, or * for any) "
                            "call the API from a browser (CORS); by default no CORS headers are sent")
        g.add_argument("--tool-call-parser", default=d.tool_call_parser,
                       choices=["qwen25", "hermes", "pythonic"],
                       help="find tool calls in chat answers (tool_choice auto) and return them as "
                            "tool_calls: <tool_call>{json}</tool_call> blocks (qwen25, hermes) or a Python "
                            "list of calls (pythonic)")
        g.add_argument("--reasoning-parser", default=d.reasoning_parser,
                       choices=["deepseek-r1", "qwen3"],
                       help="return a thinking model's <think> block as reasoning_content, apart from the "
                            "content (deepseek-r1: the template opens it; qwen3: only if the answer does)")
        g.add_argument("--tokenizer-worker-num", type=_positive_int, default=d.tokenizer_worker_num,
                       metavar="N", help="serve HTTP from N processes on the one port, each with its own "
                       "TokenizerManager (tokenizing, chat templates and JSON in parallel); the detokenizer "
                       "sends each answer to the process that owns the request (default 1: the main process)")
        g = parser.add_argument_group("tracing")
        g.add_argument("--trace", dest="trace_dir", nargs="?", const="", default=None, metavar="DIR",
                       help="write a trace of every process to DIR (default: "
                            "./minisgl-trace-YYYYmmdd-HHMMSS)")
        g.add_argument("--trace-level", type=int, default=d.trace_level, choices=[1, 2, 3],
                       help="1 requests and rounds, 2 adds per-token events, 3 adds per-row tensors (default "
                            "2)")

    @classmethod
    def from_cli_args(cls, args: argparse.Namespace) -> HttpServerArgs:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in vars(args).items() if k in names})


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value
