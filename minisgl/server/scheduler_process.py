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
                          pipe_writer: Connection, tp_rank: int = 0) -> None:
    from minisgl.distributed.launch import scheduler_process_name

    setup_child_process(scheduler_process_name(tp_rank), http_args.log_level, http_args.trace_dir, http_args.trace_level,
                        port_args.ipc_dir)
    from minisgl.configs.model_config import UnsupportedModel
    from minisgl.model_loader.bundled import ModelNotFound

    try:
        from minisgl.labs.swap import apply_from_env

        apply_from_env(quiet=True)  # a lab's component (MINISGL_LAB), installed before anything is built
        scheduler = _build_scheduler(server_args, port_args, tp_rank)
    except Exception as e:
        logger.exception("the scheduler could not start")
        pipe_writer.send({"status": "error", "message": one_line(e),
                          "exit_code": 2 if isinstance(e, (ModelNotFound, UnsupportedModel)) else 1})
        sys.exit(2)
    runner = scheduler.model_runner
    # what the tokenizer manager needs to refuse a request before it is sent (SGLang's get_init_info)
    pipe_writer.send({"status": "ready", "max_req_len": scheduler.max_req_len,
                      "max_total_num_tokens": runner.max_total_num_tokens, "context_len": runner.context_len,
                      "vocab_size": runner.model_config.vocab_size})
    try:
        scheduler.event_loop_normal()
    except Exception as e:
        logger.exception("the scheduler crashed")
        pipe_writer.send({"status": "died", "message": one_line(e)})
        sys.exit(1)


def _build_scheduler(server_args: ServerArgs, port_args: PortArgs, tp_rank: int = 0):
    from minisgl.model_executor.model_runner import ModelRunner
    from minisgl.model_loader.loader import load_model_config, load_tokenizer, resolve_model
    from minisgl.scheduler.scheduler import Scheduler

    source = resolve_model(server_args.model)
    config = load_model_config(source)
    tokenizer = load_tokenizer(source)
    runner = ModelRunner(config, source, server_args, tp_rank=tp_rank)
    context = zmq.Context()
    recv_from_tokenizer = send_to_detokenizer = None
    if tp_rank == 0:  # with --tp-size N the other ranks get rank 0's inputs (distributed/scheduler_io.py)
        recv_from_tokenizer = PullReceiver(context, port_args.scheduler_input_ipc_name, src="tokenizer_manager")
        send_to_detokenizer = PushSender(context, port_args.detokenizer_ipc_name, dst="detokenizer")
    if server_args.tp_size > 1:
        from minisgl.distributed.scheduler_io import NoSender, TpBroadcastReceiver

        recv_from_tokenizer = TpBroadcastReceiver(recv_from_tokenizer)
        send_to_detokenizer = send_to_detokenizer or NoSender()
    return Scheduler(server_args, runner, tokenizer, recv_from_tokenizer, send_to_detokenizer)
