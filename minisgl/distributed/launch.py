"""Tensor parallelism's flags (SGLang's: --tp-size, --nnodes, --node-rank, --dist-init-addr) and which
scheduler ranks this machine starts.

One node: `minisgl serve --tp-size N` starts N scheduler processes, ranks 0..N-1. Several nodes: each
node's `minisgl serve` starts ranks node_rank * N/nnodes .. (node_rank + 1) * N/nnodes - 1; node 0 also
runs the HTTP server, the TokenizerManager and the detokenizer, the other nodes only their ranks.
"""

from __future__ import annotations

import argparse
import dataclasses
import socket
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from minisgl.server_args import ServerArgs


def add_parallel_cli_args(parser: argparse.ArgumentParser, d: ServerArgs) -> None:
    g = parser.add_argument_group("tensor parallelism")
    g.add_argument("--tp-size", "--tensor-parallel-size", dest="tp_size", type=int, default=d.tp_size,
                   help="split every layer over N ranks, one scheduler process each (torch.distributed: gloo "
                        "on cpu, nccl on cuda, hccl on npu); N must divide the model's attention and "
                        "key/value heads")
    g.add_argument("--nnodes", type=int, default=d.nnodes,
                   help="machines the --tp-size ranks are spread over")
    g.add_argument("--node-rank", type=int, default=d.node_rank,
                   help="this machine's index among --nnodes (node 0 serves HTTP; the others run only ranks)")
    g.add_argument("--dist-init-addr", default=d.dist_init_addr,
                   help="host:port of node 0 where the ranks meet (needed with --nnodes > 1; default: a free "
                        "local port). Port 0 on node 0: it binds a free port and prints the address for the "
                        "other nodes")


def validate_parallel_args(args: ServerArgs) -> None:
    if args.tp_size < 1:
        raise ValueError(f"--tp-size must be >= 1, not {args.tp_size}")
    if args.nnodes < 1:
        raise ValueError(f"--nnodes must be >= 1, not {args.nnodes}")
    if args.tp_size % args.nnodes:
        raise ValueError(f"--nnodes {args.nnodes} must divide --tp-size {args.tp_size} (each node runs as "
                         "many ranks)")
    if not 0 <= args.node_rank < args.nnodes:
        raise ValueError(f"--node-rank must be in [0, {args.nnodes - 1}] for --nnodes {args.nnodes}, "
                         f"not {args.node_rank}")
    if args.nnodes > 1 and args.dist_init_addr is None:
        raise ValueError("--nnodes > 1 needs --dist-init-addr host:port (node 0's address, the same on every "
                         "node)")
    if args.dist_init_addr is not None:
        host, _, port = args.dist_init_addr.rpartition(":")
        if not host or not port.isdigit() or not 0 <= int(port) < 65536:
            raise ValueError(f"--dist-init-addr must be host:port, not {args.dist_init_addr!r}")
        if int(port) == 0 and args.node_rank > 0:
            raise ValueError("--dist-init-addr with port 0 is for node 0, which picks a free port and prints "
                             "it: give the other nodes that host:port")
    if args.tp_size > 1 and args.dp_size > 1:
        raise ValueError("--tp-size > 1 with --dp-size > 1 is not supported: give one of them")
    if args.tp_size > 1 and args.enable_overlap_schedule:
        raise ValueError("--tp-size > 1 runs the normal loop only: the overlap loop's forward thread would "
                         "share the ranks' process group with the scheduler's broadcasts; drop "
                         "--enable-overlap-schedule")
    if args.tp_size > 1 and args.quantization == "gguf":
        raise ValueError("--quantization gguf keeps whole int4 weights and cannot be split: use --tp-size 1")


def check_heads(args: ServerArgs, num_attention_heads: int, num_key_value_heads: int) -> None:
    """Each rank holds whole heads: refuse, before any process starts, a --tp-size that does not divide
    them."""
    for what, n in (("attention heads", num_attention_heads), ("key/value heads", num_key_value_heads)):
        if n % args.tp_size:
            raise ValueError(f"--tp-size {args.tp_size} does not divide the model's {n} {what}; use a "
                             f"divisor of both {num_attention_heads} and {num_key_value_heads}")


def with_dist_init_addr(args: ServerArgs) -> tuple[ServerArgs, socket.socket | None]:
    """One node and no --dist-init-addr, or node 0 given port 0: the ranks meet on a port this process binds
    now and keeps listening, handed to rank 0 for its TCPStore (parallel_state.py), so no other process can
    take the port in between; the other ranks' connections wait in its backlog until rank 0 serves them."""
    if args.tp_size == 1:
        return args, None
    host = "127.0.0.1"
    if args.dist_init_addr is not None:
        host, _, port = args.dist_init_addr.rpartition(":")
        if args.node_rank > 0 or int(port) != 0:
            return args, None
    sock = socket.socket()
    sock.bind((host, 0))
    sock.listen(args.tp_size)
    return dataclasses.replace(args, dist_init_addr=f"{host}:{sock.getsockname()[1]}"), sock


def scheduler_process_name(tp_rank: int) -> str:
    """Rank 0 is the `scheduler` every tool knows (trace lanes, replay); the others are scheduler_tp1, …"""
    return "scheduler" if tp_rank == 0 else f"scheduler_tp{tp_rank}"


def node_tp_ranks(args: ServerArgs) -> list[int]:
    """The scheduler ranks this node starts."""
    per_node = args.tp_size_per_node
    return list(range(args.node_rank * per_node, (args.node_rank + 1) * per_node))
