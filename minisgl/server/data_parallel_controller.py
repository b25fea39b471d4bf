"""DataParallelController: with --dp-size N > 1, the process between the TokenizerManager and N scheduler
ranks. It only forwards; it runs no model and takes no part in the way back (each rank's scheduler sends its
tokens to the one detokenizer, as a single scheduler does).

    TokenizedGenerateReqInput -> dispatching: the request's routed_dp_rank if it has one, else the
                                 --load-balance-method's pick (round_robin_scheduler,
                                 shortest_queue_scheduler)
    AbortReq                  -> every rank (a rank that does not hold the rid ignores it)
    FlushCacheReq, GetLoadReq -> every rank; the TokenizerManager combines the N replies
    PauseGenerationReqInput, ContinueGenerationReqInput -> every rank

Loads: each rank sends a GetLoadReqOutput whenever its running + waiting count changed (SGLang's ranks send
WatchLoadUpdateReq). Between two reports the controller adds the requests it sent to that rank itself, so a
burst of requests does not all go to the rank that looked emptiest a moment ago.
"""

from __future__ import annotations

import logging
import sys
from multiprocessing.connection import Connection

import zmq

from minisgl.scheduler.io_struct import (
    AbortReq,
    ContinueGenerationReqInput,
    FlushCacheReq,
    GetLoadReq,
    GetLoadReqOutput,
    PauseGenerationReqInput,
    TokenizedGenerateReqInput,
)
from minisgl.server import dp_trace
from minisgl.server.child_process import one_line, setup_child_process
from minisgl.server.http_server_args import HttpServerArgs
from minisgl.server.port_args import PortArgs
from minisgl.server.zmq_io import PullReceiver, PushSender
from minisgl.server_args import ServerArgs

logger = logging.getLogger(__name__)


class DataParallelController:
    def __init__(self, server_args: ServerArgs, port_args: PortArgs, context: zmq.Context):
        self.dp_size = server_args.dp_size
        self.load_balance_method = server_args.load_balance_method
        self.recv_from_tokenizer = PullReceiver(context, port_args.scheduler_input_ipc_name,
                                                src="tokenizer_manager")
        self.recv_load = PullReceiver(context, port_args.dp_controller_load_ipc_name, src="scheduler")
        self.workers = [PushSender(context, port_args.for_dp_rank(rank).scheduler_input_ipc_name,
                                   dst=f"scheduler_dp{rank}") for rank in range(self.dp_size)]
        self.round_robin_counter = 0
        # each rank's running + waiting requests: as it last reported, plus those sent to it since
        self.num_reqs = [0] * self.dp_size
        self.dispatching = {"round_robin": self.round_robin_scheduler,
                            "shortest_queue": self.shortest_queue_scheduler}[self.load_balance_method]

    # ---- the loop ---------------------------------------------------------------------------------
    def event_loop(self) -> None:
        poller = zmq.Poller()
        poller.register(self.recv_from_tokenizer.socket, zmq.POLLIN)
        poller.register(self.recv_load.socket, zmq.POLLIN)
        while True:
            poller.poll(200)  # wakes now and then even when idle, so a SIGTERM is noticed
            for load in self.recv_load.recv_all():  # the loads first: the dispatch below sees the newest
                self.handle_load_update(load)
            for recv_req in self.recv_from_tokenizer.recv_all():
                self.process_input_request(recv_req)

    def process_input_request(self, recv_req) -> None:
        if isinstance(recv_req, TokenizedGenerateReqInput):
            self.dispatching_with_trace(recv_req)
        elif isinstance(recv_req, (AbortReq, FlushCacheReq, GetLoadReq, PauseGenerationReqInput,
                                   ContinueGenerationReqInput)):
            self.send_to_all_workers(recv_req)
        else:
            logger.error("the data parallel controller got an unknown message: %s", type(recv_req).__name__)

    def handle_load_update(self, load: GetLoadReqOutput) -> None:
        self.num_reqs[load.dp_rank] = load.num_running_reqs + load.num_waiting_reqs

    # ---- dispatching ------------------------------------------------------------------------------
    def dispatching_with_trace(self, req: TokenizedGenerateReqInput) -> None:
        loads = list(self.num_reqs)  # what this decision saw
        rank = self.maybe_external_dp_rank_routing(req)
        routed = rank is not None
        if rank is None:
            rank = self.dispatching()
        dp_trace.dispatched(req.rid, self.load_balance_method, loads, rank, routed)
        self.num_reqs[rank] += 1
        self.workers[rank].send(req)

    def maybe_external_dp_rank_routing(self, req: TokenizedGenerateReqInput) -> int | None:
        """The client's choice (body's routed_dp_rank or the X-Data-Parallel-Rank header); the HTTP server has
        already refused a rank out of range."""
        if req.routed_dp_rank is not None and 0 <= req.routed_dp_rank < self.dp_size:
            return req.routed_dp_rank
        return None

    def round_robin_scheduler(self) -> int:
        rank = self.round_robin_counter
        self.round_robin_counter = (self.round_robin_counter + 1) % self.dp_size
        return rank

    def shortest_queue_scheduler(self) -> int:
        """The rank with the fewest running and waiting requests; ties go to the lowest rank."""
        return min(range(self.dp_size), key=lambda rank: self.num_reqs[rank])

    def send_to_all_workers(self, obj) -> None:
        for worker in self.workers:
            worker.send(obj)


def run_data_parallel_controller_process(server_args: ServerArgs, http_args: HttpServerArgs,
                                         port_args: PortArgs, pipe_writer: Connection) -> None:
    setup_child_process("data_parallel_controller", http_args.log_level, http_args.trace_dir,
                        http_args.trace_level, port_args.ipc_dir)
    try:
        controller = DataParallelController(server_args, port_args, zmq.Context())
    except Exception as e:
        logger.exception("the data parallel controller could not start")
        pipe_writer.send({"status": "error", "message": one_line(e)})
        sys.exit(1)
    pipe_writer.send({"status": "ready"})
    try:
        controller.event_loop()
    except Exception as e:
        logger.exception("the data parallel controller crashed")
        pipe_writer.send({"status": "died", "message": one_line(e)})
        sys.exit(1)
