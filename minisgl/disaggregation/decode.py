"""The decode server (--disaggregation-mode decode), after SGLang's disaggregation/decode.py.

    disagg_decode_prealloc_queue   a new request waits here for KV slots: its prompt's, plus one decode slot
                                   for every running or transferring request (the KV budget); then it
                                   registers its room and its KVReceiver's endpoint with the prefill's
                                   bootstrap server
    disagg_decode_transfer_queue   its preallocated slots wait for the prompt's KV rows and first token
    running_batch                  KV written into the slots, the ack sent: the request joins the running
                                   batch as if it had been prefilled here (SGLang's PREBUILT batch) and
                                   decodes as usual

The decode server's round is run_one_round_disagg_decode (SGLang's event_loop_normal_disagg_decode): the
normal round, with the two queues moved on before the batch is chosen.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import zmq

from minisgl.disaggregation.bootstrap import BootstrapClient
from minisgl.disaggregation.kv_transfer import KVMessage, KVReceiver, scatter_kv
from minisgl.disaggregation.utils import RequestQueue, local_address_towards

if TYPE_CHECKING:
    from minisgl.scheduler.req import Req
    from minisgl.scheduler.schedule_batch import ScheduleBatch

logger = logging.getLogger(__name__)


class DecodePreallocQueue(RequestQueue):
    """New requests, until the KV budget lets them take slots for their prompt and register their room."""

    def __init__(self, sched, kv_receiver: KVReceiver, bootstrap_client: BootstrapClient):
        super().__init__()
        self.sched, self.kv_receiver, self.bootstrap_client = sched, kv_receiver, bootstrap_client

    def pop_preallocated(self, holders: int) -> list[Req]:
        """Preallocate, in arrival order, for as many requests as the KV budget allows; `holders` requests
        (running or transferring) already hold slots and each needs one more to decode."""
        s, done = self.sched, []
        while self.queue:
            req = self.queue[0]
            n = len(req.origin_input_ids)
            room = s.token_to_kv_pool.available_size() + s.tree_cache.evictable_size()
            if (holders >= s.server_args.max_running_requests or s.req_to_token_pool.available_size() == 0
                    or n + holders + 1 > room):
                break
            self.queue.pop(0)
            (req.req_pool_idx,) = s.req_to_token_pool.alloc(1)
            slots = s.cache_manager.alloc_token_slots(n)
            s.req_to_token_pool.req_to_token[req.req_pool_idx, :n] = slots
            req.fill_ids, req.prefix_indices = list(req.origin_input_ids), slots.clone()
            endpoint = self.kv_receiver.endpoint(local_address_towards(req.bootstrap_host))
            self.bootstrap_client.register(req.bootstrap_host, req.bootstrap_port, req.bootstrap_room,
                                           endpoint, n)
            s.disagg_trace.preallocated(req, slots, endpoint)
            done.append(req)
            holders += 1
        return done


class DecodeTransferQueue(RequestQueue):
    """Requests whose slots wait for the prompt's KV rows and first token from the prefill server."""

    holds_kv = True  # its slots wait for the KV: an abort finishes it when the KV arrives

    def __init__(self, kv_receiver: KVReceiver):
        super().__init__()
        self.kv_receiver = kv_receiver

    def pop_transferred(self) -> list[tuple[Req, KVMessage]]:
        """The requests whose KV arrived, each with its message, in arrival order."""
        done = []
        for msg in self.kv_receiver.poll():
            req = next((r for r in self.queue if r.bootstrap_room == msg.room), None)
            if req is None:
                logger.warning("KV for room %d arrived, but no request here waits for it", msg.room)
                continue
            n = len(req.origin_input_ids)
            if msg.k.shape[1] != n:
                raise RuntimeError(f"room {msg.room}: {msg.k.shape[1]} KV rows arrived for a {n}-token "
                                   "prompt")
            self.queue.remove(req)
            done.append((req, msg))
        return done


class SchedulerDisaggregationDecodeMixin:
    def init_disagg_decode(self, context: zmq.Context) -> None:
        self.kv_receiver = KVReceiver(context)
        self.bootstrap_client = BootstrapClient(context)
        self.disagg_decode_prealloc_queue = DecodePreallocQueue(self, self.kv_receiver, self.bootstrap_client)
        self.disagg_decode_transfer_queue = DecodeTransferQueue(self.kv_receiver)
        self.disagg_queues = [self.disagg_decode_prealloc_queue, self.disagg_decode_transfer_queue]
        self.peer_socket = self.kv_receiver.socket

    def run_one_round_disagg_decode(self, block: bool = False) -> ScheduleBatch | None:
        return self.run_disagg_round(self.process_decode_queue, self.process_batch_result, block)

    def process_decode_queue(self) -> None:
        transfer = self.disagg_decode_transfer_queue
        timeout = self.server_args.disaggregation_transfer_timeout
        for req in transfer.pop_aborted():  # KV that arrives for its room later is dropped (pop_transferred)
            self._free_preallocated(req, "aborted")
            self.disagg_abort(req)
        for req in transfer.pop_expired(timeout):  # its prefill server died, or never got the request
            self._free_preallocated(req, "timeout")
            self.disagg_time_out(req, "transfer", f"the KV of room {req.bootstrap_room} did not arrive from "
                                 f"its prefill server within {timeout:g} s "
                                 "(--disaggregation-transfer-timeout)")
        holders = len(self.running_batch.reqs) + len(transfer)  # each needs one more slot to decode
        for req in self.disagg_decode_prealloc_queue.pop_preallocated(holders):
            transfer.add(req)
        for req, msg in transfer.pop_transferred():
            self.pop_transferred(req, msg)

    def _free_preallocated(self, req: Req, reason: str) -> None:
        slots = self.req_to_token_pool.req_to_token[req.req_pool_idx, :len(req.origin_input_ids)].clone()
        self.cache_manager.free_slots(slots, reason)
        self.req_to_token_pool.free(req.req_pool_idx)
        req.req_pool_idx = None

    def pop_transferred(self, req: Req, msg: KVMessage) -> None:
        """The prompt's KV arrived: write it into the preallocated slots, take the first token, ack, and join
        the running batch (or finish now, if that token already ends the request)."""
        n = len(req.origin_input_ids)
        slots = self.req_to_token_pool.req_to_token[req.req_pool_idx, :n]
        scatter_kv(self.token_to_kv_pool, slots, msg.k, msg.v)
        self.bootstrap_client.ack(req.bootstrap_host, req.bootstrap_port, req.bootstrap_room)
        self.disagg_trace.kv_received(req, slots, msg)
        req.output_ids.append(msg.first_token)
        req.output_logprobs.append(msg.logprob)
        if req.top_logprobs_num > 0:  # the prefill side's top logprobs do not travel: none for this token
            req.output_top_logprobs_val.append([])
            req.output_top_logprobs_idx.append([])
        req.check_finished(self.tokenizer)
        self.trace_collector.output_appended(req)
        if req.finished():
            self.cache_manager.cache_finished_req(req)
        else:
            self.running_batch.reqs.append(req)  # PREBUILT: as if its prefill had run here
        self.trace_collector.results_processed()
        self.stream_output([req])
