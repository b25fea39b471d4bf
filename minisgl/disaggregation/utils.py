"""DisaggregationMode, the flags of prefill/decode disaggregation (SGLang's names) with their validation, and
RequestQueue, what the four PD queues have in common."""

from __future__ import annotations

import argparse
import socket
import time
from enum import Enum


class RequestQueue:
    """Requests in arrival order, as one PD queue holds them (each queue adds its own pop_*)."""

    holds_kv = False  # its requests hold KV slots: an abort waits until their transfer ends

    def __init__(self) -> None:
        self.queue: list = []

    def __len__(self) -> int:
        return len(self.queue)

    def add(self, req) -> None:
        req.disagg_wait_start = time.monotonic()
        self.queue.append(req)

    def pop_expired(self, timeout: float) -> list:
        """The requests that have waited here longer than `timeout` seconds for their peer, taken out."""
        now = time.monotonic()
        expired = [r for r in self.queue if now - r.disagg_wait_start > timeout]
        self.queue = [r for r in self.queue if r not in expired]
        return expired

    def pop_aborted(self) -> list:
        """The requests aborted while they waited here (to_abort: they hold KV, so the abort left them here
        for this queue's own processing to free), taken out."""
        aborted = [r for r in self.queue if r.to_abort]
        self.queue = [r for r in self.queue if not r.to_abort]
        return aborted

    def remove(self, req) -> bool:
        """An abort: a request that holds no KV yet is simply taken out (True if it was here)."""
        if self.holds_kv or req not in self.queue:
            return False
        self.queue.remove(req)
        return True


class DisaggregationMode(Enum):
    NULL = "null"  # one server does both: the ordinary scheduler
    PREFILL = "prefill"  # computes the prompt's KV and the first token, hands them to a decode server
    DECODE = "decode"  # receives them into preallocated KV slots and decodes the rest


# ZeroMQ sockets carry the KV rows as raw bytes beside a JSON header (kv_transfer.py). SGLang's backends are
# RDMA engines (mooncake, nixl) and `fake`; this one needs nothing beyond pyzmq, which minisgl already uses.
TRANSFER_BACKENDS = ("zmq",)
DEFAULT_BOOTSTRAP_PORT = 8998  # SGLang's


def add_disaggregation_cli_args(parser: argparse.ArgumentParser, d) -> None:
    g = parser.add_argument_group("prefill/decode disaggregation")
    g.add_argument("--disaggregation-mode", default=d.disaggregation_mode,
                   choices=[m.value for m in DisaggregationMode],
                   help="null (default): one server prefills and decodes. prefill: compute each prompt's KV "
                        "and first token and send them to the decode server the router paired it with. "
                        "decode: receive them and decode the rest. Run behind `sglang-router "
                        "--pd-disaggregation` (`minisgl router --pd-disaggregation` starts a pair)")
    g.add_argument("--disaggregation-bootstrap-port", type=int, default=d.disaggregation_bootstrap_port,
                   help="prefill: the port of its bootstrap server, where decode servers register for a "
                        f"request's room (default {DEFAULT_BOOTSTRAP_PORT}, SGLang's; 0 picks a free one, "
                        "which the ready line names); give the router the same number (--prefill URL PORT)")
    g.add_argument("--disaggregation-bootstrap-timeout", type=float,
                   default=d.disaggregation_bootstrap_timeout, metavar="SECONDS",
                   help="prefill: a request whose decode half has not registered by then fails with 503 "
                        "(default %(default)g)")
    g.add_argument("--disaggregation-transfer-timeout", type=float,
                   default=d.disaggregation_transfer_timeout, metavar="SECONDS",
                   help="a request whose KV is not acknowledged (prefill) or has not arrived (decode) by "
                        "then fails with 503, its KV slots freed (default %(default)g)")
    g.add_argument("--disaggregation-transfer-backend", default=d.disaggregation_transfer_backend,
                   choices=TRANSFER_BACKENDS,
                   help="how the KV rows travel: zmq (the only one here: ZeroMQ sockets, raw bytes)")


def validate_disaggregation_args(args) -> None:
    """One clear line for each combination this engine does not support."""
    mode = args.disaggregation_mode
    if mode not in [m.value for m in DisaggregationMode]:
        raise ValueError(f"--disaggregation-mode must be null, prefill or decode, not {mode!r}")
    if args.disaggregation_transfer_backend not in TRANSFER_BACKENDS:
        raise ValueError("--disaggregation-transfer-backend must be zmq, not "
                         f"{args.disaggregation_transfer_backend!r}")
    for name in ("bootstrap", "transfer"):
        if not getattr(args, f"disaggregation_{name}_timeout") > 0:
            raise ValueError(f"--disaggregation-{name}-timeout must be a number of seconds above 0")
    if not 0 <= args.disaggregation_bootstrap_port < 65536:
        raise ValueError(f"--disaggregation-bootstrap-port must be from 0 (a free one) to 65535, not "
                         f"{args.disaggregation_bootstrap_port}")
    if mode == "null":
        return
    if args.overlap_schedule():
        raise ValueError(f"--disaggregation-mode {mode} runs the normal loop only: leave out "
                         "--enable-overlap-schedule")
    if args.speculative_algorithm is not None:
        raise ValueError(f"--disaggregation-mode {mode} and --speculative-algorithm cannot be combined")
    if args.tp_size > 1:
        raise ValueError(f"--disaggregation-mode {mode} needs --tp-size 1: the KV rows of one rank are sent")
    if args.dp_size > 1:
        raise ValueError(f"--disaggregation-mode {mode} needs --dp-size 1: one scheduler per server")
    if args.enable_mixed_chunk:
        raise ValueError(f"--disaggregation-mode {mode} and --enable-mixed-chunk cannot be combined: a "
                         "prefill server runs no decode rows, a decode server no prefill rows")


def local_address_towards(host: str) -> str:
    """The address of this machine that `host` can reach us at (the interface a route to it leaves by)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect((socket.gethostbyname(host), 9))  # UDP: no packet is sent
            return s.getsockname()[0]
        except OSError:
            return "127.0.0.1"
