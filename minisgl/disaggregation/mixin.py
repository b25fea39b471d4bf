"""What the Scheduler calls for prefill/decode disaggregation: one mixin over the prefill and decode halves.

    init_disaggregation      the queues and sockets of --disaggregation-mode (nothing for null)
    disagg_refusal           a request without a bootstrap room cannot be paired: refused
    process_disagg_queues    once a round, before the batch is chosen: pairing, KV transfers, acks
    disagg_busy              requests in a disaggregation queue: the scheduler is not idle
"""

from __future__ import annotations

import zmq

from minisgl.disaggregation.decode import SchedulerDisaggregationDecodeMixin
from minisgl.disaggregation.disagg_trace import DisaggTraceCollector
from minisgl.disaggregation.prefill import SchedulerDisaggregationPrefillMixin
from minisgl.disaggregation.utils import DisaggregationMode
from minisgl.server.zmq_io import RECV_POLL_MS


class SchedulerDisaggregationMixin(SchedulerDisaggregationPrefillMixin, SchedulerDisaggregationDecodeMixin):
    def init_disaggregation(self) -> None:
        self.disaggregation_mode = DisaggregationMode(self.server_args.disaggregation_mode)
        self.disagg_trace = DisaggTraceCollector(self)
        if self.disaggregation_mode == DisaggregationMode.PREFILL:
            self.init_disagg_prefill(zmq.Context.instance())
        elif self.disaggregation_mode == DisaggregationMode.DECODE:
            self.init_disagg_decode(zmq.Context.instance())

    def disagg_refusal(self, recv_req) -> str | None:
        if self.disaggregation_mode == DisaggregationMode.NULL or recv_req.bootstrap_room is not None:
            return None
        return (f"this is a {self.disaggregation_mode.value} server (--disaggregation-mode): send requests "
                "through the router (sglang-router --pd-disaggregation), which gives each a bootstrap_host, "
                "bootstrap_port and bootstrap_room")

    def disagg_queues(self) -> list[list]:
        if self.disaggregation_mode == DisaggregationMode.PREFILL:
            return [self.disagg_prefill_bootstrap_queue, self.disagg_prefill_inflight_queue]
        if self.disaggregation_mode == DisaggregationMode.DECODE:
            return [self.disagg_decode_prealloc_queue, self.disagg_decode_transfer_queue]
        return []

    def disagg_busy(self) -> bool:
        return any(self.disagg_queues())

    def disagg_remove_waiting(self, req) -> bool:
        """An abort of a request that holds no KV yet (bootstrap or prealloc queue): taken out, True."""
        queues = self.disagg_queues()[:1]
        for queue in queues:
            if req in queue:
                queue.remove(req)
                return True
        return False

    def process_disagg_queues(self) -> None:
        if self.disaggregation_mode == DisaggregationMode.NULL:
            return
        self._process_disagg_queues()
        nothing_to_run = not self.waiting_queue and self.running_batch.is_empty() and self.chunked_req is None
        if nothing_to_run and self.disagg_busy():
            self._wait_for_peer()
            self._process_disagg_queues()

    def _process_disagg_queues(self) -> None:
        if self.disaggregation_mode == DisaggregationMode.PREFILL:
            self.process_disagg_prefill_bootstrap_queue()  # also takes in registrations and acks
            self.process_disagg_prefill_inflight_queue()
        else:
            self.process_decode_queue()

    def _wait_for_peer(self) -> None:
        """Only the other server can move things on: sleep until its message (or a new request) arrives."""
        poller = zmq.Poller()
        peer = (self.bootstrap_server if self.disaggregation_mode == DisaggregationMode.PREFILL
                else self.kv_receiver)
        poller.register(peer.socket, zmq.POLLIN)
        tokenizer_socket = getattr(self.recv_from_tokenizer, "socket", None)
        if tokenizer_socket is not None:
            poller.register(tokenizer_socket, zmq.POLLIN)
        poller.poll(RECV_POLL_MS)
