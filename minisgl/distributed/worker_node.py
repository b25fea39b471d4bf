"""A node other than 0 (`minisgl serve --nnodes N --node-rank K`, K > 0): it starts only its scheduler
ranks, which meet node 0's at --dist-init-addr and take rank 0's inputs; no HTTP server, no tokenizer, no
detokenizer here (as SGLang's non-zero nodes). It lives until a signal or until one of its ranks ends."""

from __future__ import annotations

import sys
import time

from minisgl.server.http_server_args import HttpServerArgs
from minisgl.server.port_args import PortArgs
from minisgl.server.subprocesses import EngineProcesses, StartupError
from minisgl.server_args import ServerArgs


def launch_worker_node(server_args: ServerArgs, http_args: HttpServerArgs, stop) -> int:
    """`stop`: the launcher's stop flag (`is_set()`), set by SIGINT/SIGTERM. Returns the exit status."""
    http_args.resolve_trace_dir()  # every rank of this node writes into the same folder
    port_args = PortArgs.init_new()  # the children's private folder (their parent watch removes it)
    processes: EngineProcesses | None = None
    ranks = ", ".join(str(r) for r in range(server_args.node_rank * server_args.tp_size_per_node,
                                           (server_args.node_rank + 1) * server_args.tp_size_per_node))
    print(f"minisgl serve: node {server_args.node_rank} of {server_args.nnodes}: starting scheduler ranks "
          f"{ranks}, meeting at {server_args.dist_init_addr}", flush=True)
    try:
        processes = EngineProcesses(server_args, http_args, port_args)
        processes.wait_ready(stop.is_set)
        print(f"minisgl serve: node {server_args.node_rank} ready ({processes.pids()})", flush=True)
        while not stop.is_set():
            dead = processes.first_death()
            if dead is not None:
                print(f"minisgl serve: error: {dead.death_reason()}", file=sys.stderr, flush=True)
                return 1
            time.sleep(0.2)
        return 0
    except StartupError as e:
        print(f"minisgl serve: error: {e}", file=sys.stderr, flush=True)
        return e.exit_code
    except KeyboardInterrupt:
        return 0
    finally:
        if processes is not None:
            processes.stop()
        port_args.remove()
