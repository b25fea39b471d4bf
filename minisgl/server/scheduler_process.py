"""run_scheduler_process: the child process that owns the model, the KV cache and the Scheduler loop."""

from __future__ import annotations

import logging
import sys
from multiprocessing.connection import Connection

import zmq

from minisgl.server.child_process import one_line, setup_child_process
from minisgl.server.http_server_args import HttpServerArgs
from minisgl.server.port_args import PortArgs
from minisgl.server.zmq_io import PullReceiver, PushSender
from minisgl.server_args import ServerArgs

logger = logging.getLogger(__name__)


def run_scheduler_process(server_args: ServerArgs, http_args: HttpServerArgs, port_args: PortArgs,
                          pipe_writer: Connection, dp_rank: int | None = None, tp_rank: int = 0,
                          dist_socket=None) -> None:
    """dp_rank None: the one scheduler (process `scheduler`); else one data-parallel rank (`scheduler_dp0`,
    …), which receives from the DataParallelController and reports its load back to it. tp_rank: with
    --tp-size N > 1, this process's tensor-parallel rank (rank 0 is `scheduler`, the others `scheduler_tp1`,
    …). dist_socket: rank 0's, the port its TCPStore listens on, bound by `minisgl serve`."""
    from minisgl.distributed import parallel_state
    from minisgl.distributed.launch import scheduler_process_name

    parallel_state.LISTEN_SOCKET = dist_socket

    name = scheduler_process_name(tp_rank) if dp_rank is None else f"scheduler_dp{dp_rank}"
    setup_child_process(name, http_args.log_level, http_args.trace_dir, http_args.trace_level,
                        port_args.ipc_dir)
    from minisgl.configs.model_config import UnsupportedModel
    from minisgl.model_loader.bundled import ModelNotFound

    try:
        from minisgl.labs.swap import apply_from_env

        apply_from_env(quiet=True)  # a lab's component (MINISGL_LAB), installed before anything is built
        scheduler = _build_scheduler(server_args, port_args, dp_rank, tp_rank)
    except Exception as e:
        logger.exception("the scheduler could not start")
        pipe_writer.send({"status": "error", "message": one_line(e),
                          "exit_code": 2 if isinstance(e, (ModelNotFound, UnsupportedModel)) else 1})
        sys.exit(2)
    runner = scheduler.model_runner
    # what the tokenizer manager needs to refuse a request before it is sent (SGLang's get_init_info)
    bootstrap = getattr(scheduler, "bootstrap_server", None)  # a prefill server's: the port it listens on
    pipe_writer.send({"status": "ready", "max_req_len": scheduler.max_req_len,
                      "bootstrap_port": bootstrap.port if bootstrap is not None else None,
                      "max_total_num_tokens": runner.max_total_num_tokens, "context_len": runner.context_len,
                      "vocab_size": runner.model_config.vocab_size})
    try:
        if dp_rank is not None:
            _event_loop_reporting_load(scheduler, port_args)
        else:
            scheduler.event_loop()
    except Exception as e:
        logger.exception("the scheduler crashed")
        pipe_writer.send({"status": "died", "message": one_line(e)})
        sys.exit(1)


def _event_loop_reporting_load(scheduler, port_args: PortArgs) -> None:
    """The scheduler's event_loop, and after each round the rank's load to the DataParallelController
    when it changed (SGLang's schedulers send WatchLoadUpdateReq for the same purpose): shortest_queue
    dispatches by it."""
    sender = PushSender(zmq.Context.instance(), port_args.dp_controller_load_ipc_name,
                        dst="data_parallel_controller")
    last = None
    while True:
        scheduler.run_round(block=True)
        load = scheduler.get_load()
        if (load.num_running_reqs, load.num_waiting_reqs) != last:
            last = (load.num_running_reqs, load.num_waiting_reqs)
            sender.send(load)


def _build_scheduler(server_args: ServerArgs, port_args: PortArgs, dp_rank: int | None, tp_rank: int = 0):
    from minisgl.model_executor.model_runner import ModelRunner
    from minisgl.model_loader.decode_tokenizer import load_decode_tokenizer
    from minisgl.model_loader.loader import load_model_config, resolve_model
    from minisgl.scheduler.scheduler import Scheduler

    source = resolve_model(server_args.model)
    config = load_model_config(source)
    tokenizer = load_decode_tokenizer(source)  # the scheduler only decodes (stop strings, the trace's text)
    runner = ModelRunner(config, source, server_args, tp_rank=tp_rank)
    context = zmq.Context()
    if dp_rank is not None:
        recv_from_tokenizer = PullReceiver(context, port_args.for_dp_rank(dp_rank).scheduler_input_ipc_name,
                                           src="data_parallel_controller")
    elif tp_rank == 0:
        recv_from_tokenizer = PullReceiver(context, port_args.scheduler_input_ipc_name,
                                           src="tokenizer_manager")
    else:  # with --tp-size N the other ranks get rank 0's inputs (distributed/scheduler_io.py)
        recv_from_tokenizer = None
    send_to_detokenizer = (PushSender(context, port_args.detokenizer_ipc_name, dst="detokenizer")
                           if tp_rank == 0 else None)
    if server_args.tp_size > 1:
        from minisgl.distributed.scheduler_io import NoSender, TpBroadcastReceiver

        recv_from_tokenizer = TpBroadcastReceiver(recv_from_tokenizer)
        send_to_detokenizer = send_to_detokenizer or NoSender()
    return Scheduler(server_args, runner, tokenizer, recv_from_tokenizer, send_to_detokenizer, dp_rank or 0)
