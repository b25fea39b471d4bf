"""The prefill server (--disaggregation-mode prefill), after SGLang's disaggregation/prefill.py.

    disagg_prefill_bootstrap_queue  a new request waits here until its decode half registered for its room
    waiting_queue                   then admitted as usual (radix cache, chunked prefill)
    forward                         the prompt's KV is computed and the first token sampled
    disagg_prefill_inflight_queue   KV rows and first token sent (kv_transfer.py); waits for the decode's ack
    finished                        ack received: the KV goes to the radix tree (or is freed), the answer is
                                    the first token (the router returns the decode server's answer)

The prefill server's round is run_one_round_disagg_prefill (SGLang's event_loop_normal_disagg_prefill): the
normal round's steps, with the two queues moved on before the batch is chosen and the batch's result sent
to the decode half instead of joining the running batch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import zmq

from minisgl.disaggregation.bootstrap import BootstrapServer
from minisgl.disaggregation.kv_transfer import KVSender, gather_kv
from minisgl.disaggregation.utils import RequestQueue
from minisgl.scheduler.finish_reason import FINISH_LENGTH

if TYPE_CHECKING:
    from minisgl.scheduler.req import Req
    from minisgl.scheduler.schedule_batch import ScheduleBatch
    from minisgl.scheduler.utils import GenerationBatchResult


class PrefillBootstrapQueue(RequestQueue):
    """New requests, until their decode half registers for their room at this server's BootstrapServer."""

    def __init__(self, bootstrap_server: BootstrapServer):
        super().__init__()
        self.bootstrap_server = bootstrap_server

    def pop_bootstrapped(self) -> list[tuple[Req, dict]]:
        """The requests whose decode half has registered, in arrival order, each with that peer."""
        self.bootstrap_server.poll()  # also takes in registrations and acks
        registered = self.bootstrap_server.registered
        ready = [r for r in self.queue if r.bootstrap_room in registered]
        self.queue = [r for r in self.queue if r.bootstrap_room not in registered]
        return [(r, registered[r.bootstrap_room]) for r in ready]


class PrefillInflightQueue(RequestQueue):
    """Requests whose KV rows and first token were sent, until their decode half acknowledges them."""

    holds_kv = True  # its KV is on the way: an abort finishes it when the ack comes

    def __init__(self, bootstrap_server: BootstrapServer):
        super().__init__()
        self.bootstrap_server = bootstrap_server

    def pop_transferred(self) -> list[Req]:
        """The acknowledged requests, in the order they were sent; their rooms are forgotten."""
        server = self.bootstrap_server
        acked = [r for r in self.queue if r.bootstrap_room in server.acked]
        for req in acked:
            self.queue.remove(req)
            server.acked.discard(req.bootstrap_room)
            server.registered.pop(req.bootstrap_room, None)
        return acked


class SchedulerDisaggregationPrefillMixin:
    def init_disagg_prefill(self, context: zmq.Context) -> None:
        self.bootstrap_server = BootstrapServer(context, self.server_args.disaggregation_bootstrap_port)
        self.kv_sender = KVSender(context)
        self.disagg_prefill_bootstrap_queue = PrefillBootstrapQueue(self.bootstrap_server)
        self.disagg_prefill_inflight_queue = PrefillInflightQueue(self.bootstrap_server)
        self.disagg_queues = [self.disagg_prefill_bootstrap_queue, self.disagg_prefill_inflight_queue]
        self.peer_socket = self.bootstrap_server.socket

    def run_one_round_disagg_prefill(self, block: bool = False) -> ScheduleBatch | None:
        return self.run_disagg_round(self.process_disagg_prefill_queues,
                                     self.process_batch_result_disagg_prefill, block)

    def process_disagg_prefill_queues(self) -> None:
        args = self.server_args
        for req in self.disagg_prefill_bootstrap_queue.pop_expired(args.disaggregation_bootstrap_timeout):
            self.disagg_time_out(req, "bootstrap", f"its decode server did not register for room "
                                 f"{req.bootstrap_room} within {args.disaggregation_bootstrap_timeout:g} s "
                                 "(--disaggregation-bootstrap-timeout)")
        for req in self.disagg_prefill_inflight_queue.pop_expired(args.disaggregation_transfer_timeout):
            self.bootstrap_server.registered.pop(req.bootstrap_room, None)
            self.cache_manager.cache_finished_req(req, free_reason="timeout")  # its KV stays in the tree
            self.disagg_time_out(req, "inflight", f"its decode server did not acknowledge the KV of room "
                                 f"{req.bootstrap_room} within {args.disaggregation_transfer_timeout:g} s "
                                 "(--disaggregation-transfer-timeout)")
        for req in self.disagg_prefill_inflight_queue.pop_aborted():  # its KV is sent; its ack is not needed
            self.bootstrap_server.registered.pop(req.bootstrap_room, None)
            self.cache_manager.cache_finished_req(req, free_reason="aborted")
            self.disagg_abort(req)
        for req, peer in self.disagg_prefill_bootstrap_queue.pop_bootstrapped():
            self.waiting_queue.append(req)
            self.disagg_trace.bootstrapped(req, peer, entered_waiting=True)
        self.process_disagg_prefill_inflight_queue()

    def process_batch_result_disagg_prefill(self, batch: ScheduleBatch,
                                            result: GenerationBatchResult) -> None:
        """Each prompt done this round: take its first token, cache its KV, send both to the decode half."""
        self.trace_collector.sampled(batch, result)
        for i, req in enumerate(batch.reqs):
            self.cache_manager.cache_unfinished_req(req)  # a chunk, or the whole prompt: others may share it
            if req is batch.chunked_req:
                continue
            req.output_ids.append(result.next_token_ids[i])
            req.output_logprobs.append(result.logprobs[i])
            if req.top_logprobs_num > 0:
                req.output_top_logprobs_val.append(result.top_logprobs_val[i])
                req.output_top_logprobs_idx.append(result.top_logprobs_idx[i])
            self.trace_collector.output_appended(req)
            self.send_kv_chunk(req)
            self.disagg_prefill_inflight_queue.add(req)
        batch.reqs = [r for r in batch.reqs if r is batch.chunked_req]  # the others never join running_batch
        self.trace_collector.results_processed()

    def send_kv_chunk(self, req: Req) -> None:
        """The prompt's KV rows (every layer) and the first token, to the endpoint its decode half
        registered."""
        peer = self.bootstrap_server.registered[req.bootstrap_room]
        slots = self.req_to_token_pool.req_to_token[req.req_pool_idx, : len(req.origin_input_ids)]
        k, v = gather_kv(self.token_to_kv_pool, slots)
        # traced first: the decode side may trace its receipt before this process writes another line
        self.disagg_trace.kv_sent(req, peer["endpoint"], slots, 2 * k.numel() * k.element_size())
        self.kv_sender.send(peer["endpoint"], req.bootstrap_room, req.output_ids[-1], req.output_logprobs[-1],
                            k, v)

    def process_disagg_prefill_inflight_queue(self) -> None:
        """Requests whose decode half acknowledged the KV finish: their KV goes back (to the tree, or
        freed)."""
        acked = self.disagg_prefill_inflight_queue.pop_transferred()
        for req in acked:
            self.disagg_trace.transfer_done(req)
            # an abort, or a first token that ends it (EOS, max_new_tokens 1)
            req.check_finished(self.tokenizer)
            if not req.finished():
                req.finished_reason = FINISH_LENGTH(len(req.output_ids))  # this half's work is done
            self.cache_manager.cache_finished_req(req, free_reason="transferred")
            self.trace_collector.req_finished(req)
        if acked:
            self.stream_output(acked)
