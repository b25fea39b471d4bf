"""run_detokenizer_process: the child process that turns the scheduler's token ids into text deltas.

It sits between the scheduler and the tokenizer manager, so the scheduler's replies to control messages
(GetLoadReqOutput, FlushCacheReqOutput) travel the same road and are passed on unchanged. With
--tokenizer-worker-num N > 1 each output goes to the worker that owns it (multi_http_worker.py).
"""

from __future__ import annotations

import logging
import sys
from multiprocessing.connection import Connection

import zmq

from minisgl.detokenizer.detokenizer_manager import DetokenizerManager
from minisgl.detokenizer.multi_http_worker import WorkerSenders, split_by_worker
from minisgl.scheduler.io_struct import BatchTokenIDOutput
from minisgl.server.child_process import one_line, setup_child_process
from minisgl.server.http_server_args import HttpServerArgs
from minisgl.server.port_args import PortArgs
from minisgl.server.zmq_io import PullReceiver
from minisgl.server_args import ServerArgs

logger = logging.getLogger(__name__)


def run_detokenizer_process(server_args: ServerArgs, http_args: HttpServerArgs, port_args: PortArgs,
                            pipe_writer: Connection) -> None:
    setup_child_process("detokenizer", http_args.log_level, http_args.trace_dir, http_args.trace_level,
                        port_args.ipc_dir)
    try:
        from minisgl.labs.swap import apply_from_env
        from minisgl.model_loader.decode_tokenizer import load_decode_tokenizer
        from minisgl.model_loader.loader import resolve_model

        apply_from_env(quiet=True)  # a lab's component (MINISGL_LAB)
        manager = DetokenizerManager(load_decode_tokenizer(resolve_model(server_args.model)))
        context = zmq.Context()
        recv_from_scheduler = PullReceiver(context, port_args.detokenizer_ipc_name, src="scheduler")
        send_to_tokenizer = WorkerSenders(context, port_args.tokenizer_ipc_name)
    except Exception as e:
        logger.exception("the detokenizer could not start")
        pipe_writer.send({"status": "error", "message": one_line(e), "exit_code": 1})
        sys.exit(1)
    pipe_writer.send({"status": "ready"})
    try:
        event_loop(manager, recv_from_scheduler, send_to_tokenizer)
    except Exception as e:
        logger.exception("the detokenizer crashed")
        pipe_writer.send({"status": "died", "message": one_line(e)})
        sys.exit(1)


def event_loop(manager: DetokenizerManager, recv_from_scheduler: PullReceiver,
               send_to_tokenizer: WorkerSenders) -> None:
    while True:
        for recv_obj in recv_from_scheduler.recv_all(block=True):
            if isinstance(recv_obj, BatchTokenIDOutput):
                for address, out in split_by_worker(manager.handle_batch_token_id_out(recv_obj)):
                    send_to_tokenizer.send(address, out)
            else:  # a reply of the scheduler's: passed on as it is, a new crossing with a flow id of its own
                send_to_tokenizer.send(recv_obj.http_worker_ipc, recv_obj)
