"""What the Scheduler gets for prefill/decode disaggregation: one mixin over the prefill and decode halves.

    init_disaggregation      the mode, and for prefill|decode its two queues (objects, as SGLang's) and
                             sockets; nothing more for null
    run_one_round_disagg_*   the round of a prefill or decode server (prefill.py, decode.py), chosen once
                             by the Scheduler in place of run_one_round
    disagg_refusal           a request without a bootstrap room cannot be paired: refused

The normal round never asks which mode it is in: the queues are in `disagg_queues` (none for null), so
`is_idle` and an abort see them without a branch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import zmq

from minisgl.disaggregation.decode import SchedulerDisaggregationDecodeMixin
from minisgl.disaggregation.disagg_trace import DisaggTraceCollector
from minisgl.disaggregation.prefill import SchedulerDisaggregationPrefillMixin
from minisgl.disaggregation.utils import DisaggregationMode
from minisgl.scheduler.finish_reason import FINISH_ABORT
from minisgl.server.zmq_io import RECV_POLL_MS

if TYPE_CHECKING:
    from minisgl.scheduler.req import Req
    from minisgl.scheduler.schedule_batch import ScheduleBatch


class SchedulerDisaggregationMixin(SchedulerDisaggregationPrefillMixin, SchedulerDisaggregationDecodeMixin):
    def init_disaggregation(self) -> None:
        self.disaggregation_mode = DisaggregationMode(self.server_args.disaggregation_mode)
        self.disagg_trace = DisaggTraceCollector(self)
        self.disagg_queues: list = []  # the mode's two queues, in the order a request passes them
        if self.disaggregation_mode == DisaggregationMode.PREFILL:
            self.init_disagg_prefill(zmq.Context.instance())
        elif self.disaggregation_mode == DisaggregationMode.DECODE:
            self.init_disagg_decode(zmq.Context.instance())

    def _add_request_to_queue(self, req: Req) -> None:
        """NULL: the waiting queue. PREFILL: wait for the decode half first; DECODE: for KV slots first."""
        if self.disaggregation_mode == DisaggregationMode.PREFILL:
            self.disagg_prefill_bootstrap_queue.add(req)
        elif self.disaggregation_mode == DisaggregationMode.DECODE:
            self.disagg_decode_prealloc_queue.add(req)
        else:
            self.waiting_queue.append(req)

    def disagg_time_out(self, req: Req, queue: str, why: str) -> None:
        """A request whose peer never answered: it fails with 503 (its KV already given back)."""
        self.disagg_trace.timed_out(req, queue)
        req.finished_reason = FINISH_ABORT(why, status_code=503)
        self.trace_collector.req_finished(req)
        self.stream_output([req])

    def disagg_abort(self, req: Req) -> None:
        """A request aborted in a queue that held its KV: that KV already given back, it finishes now."""
        req.finished_reason = FINISH_ABORT()
        self.trace_collector.req_finished(req)
        self.stream_output([req])

    def disagg_refusal(self, recv_req) -> str | None:
        if self.disaggregation_mode == DisaggregationMode.NULL or recv_req.bootstrap_room is not None:
            return None
        return (f"this is a {self.disaggregation_mode.value} server (--disaggregation-mode): send requests "
                "through the router (sglang-router --pd-disaggregation), which gives each a bootstrap_host, "
                "bootstrap_port and bootstrap_room")

    def run_disagg_round(self, process_queues: Callable[[], None], process_batch_result: Callable,
                         block: bool) -> ScheduleBatch | None:
        """A PD server's round: run_one_round's steps, with the mode's queues moved on before the batch is
        chosen and the mode's own processing of the batch's result."""
        self.trace_collector.round_begin()
        recv_reqs = self.recv_requests(block=block and self.nothing_to_run())
        self.process_input_requests(recv_reqs)
        self.wait_for_peer_if_only_it_can_move(process_queues)
        batch = self.get_next_batch_to_run()
        self.cur_batch = batch
        if batch is not None:
            result = self.run_batch(batch)
            process_batch_result(batch, result)
            self.trace_collector.round_end()
        else:
            self.self_check_during_idle()
        self.last_batch = batch
        return batch

    def wait_for_peer_if_only_it_can_move(self, process_queues: Callable[[], None]) -> None:
        """Move the queues on; if then only the other server can move things on (nothing to run here, a
        request in a queue), sleep until its message (or a new request) arrives and move them on again."""
        process_queues()
        nothing_to_run = not self.waiting_queue and self.running_batch.is_empty() and self.chunked_req is None
        if nothing_to_run and any(self.disagg_queues):
            poller = zmq.Poller()
            poller.register(self.peer_socket, zmq.POLLIN)
            tokenizer_socket = getattr(self.recv_from_tokenizer, "socket", None)
            if tokenizer_socket is not None:
                poller.register(tokenizer_socket, zmq.POLLIN)
            poller.poll(RECV_POLL_MS)
            process_queues()
