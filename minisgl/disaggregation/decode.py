"""The decode server (--disaggregation-mode decode), after SGLang's disaggregation/decode.py.

    disagg_decode_prealloc_queue   a new request waits here for KV slots: its prompt's, plus one decode slot
                                   for every running or transferring request (the KV budget); then it
                                   registers its room and its KVReceiver's endpoint with the prefill's
                                   bootstrap server
    disagg_decode_transfer_queue   its preallocated slots wait for the prompt's KV rows and first token
    running_batch                  KV written into the slots, the ack sent: the request joins the running
                                   batch as if it had been prefilled here (SGLang's PREBUILT batch) and
                                   decodes as usual
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import zmq

from minisgl.disaggregation.bootstrap import BootstrapClient
from minisgl.disaggregation.kv_transfer import KVMessage, KVReceiver, scatter_kv
from minisgl.disaggregation.utils import local_address_towards

if TYPE_CHECKING:
    from minisgl.scheduler.req import Req

logger = logging.getLogger(__name__)


class SchedulerDisaggregationDecodeMixin:
    def init_disagg_decode(self, context: zmq.Context) -> None:
        self.disagg_decode_prealloc_queue: list[Req] = []
        self.disagg_decode_transfer_queue: list[Req] = []
        self.kv_receiver = KVReceiver(context)
        self.bootstrap_client = BootstrapClient(context)

    def process_decode_queue(self) -> None:
        self.pop_preallocated()
        for msg in self.kv_receiver.poll():
            self.pop_transferred(msg)

    def pop_preallocated(self) -> None:
        """Preallocate, in arrival order, for as many requests as the KV budget allows."""
        transfer, pool = self.disagg_decode_transfer_queue, self.token_to_kv_pool
        while self.disagg_decode_prealloc_queue:
            req = self.disagg_decode_prealloc_queue[0]
            n = len(req.origin_input_ids)
            holders = len(self.running_batch.reqs) + len(transfer)
            room = pool.available_size() + self.tree_cache.evictable_size()
            if (holders >= self.server_args.max_running_requests
                    or self.req_to_token_pool.available_size() == 0
                    or n + holders + 1 > room):
                return
            self.disagg_decode_prealloc_queue.pop(0)
            (req.req_pool_idx,) = self.req_to_token_pool.alloc(1)
            slots = self.cache_manager.alloc_token_slots(n)
            self.req_to_token_pool.req_to_token[req.req_pool_idx, :n] = slots
            req.fill_ids, req.prefix_indices = list(req.origin_input_ids), slots.clone()
            endpoint = self.kv_receiver.endpoint(local_address_towards(req.bootstrap_host))
            self.bootstrap_client.register(req.bootstrap_host, req.bootstrap_port, req.bootstrap_room,
                                           endpoint, n)
            transfer.append(req)
            self.disagg_trace.preallocated(req, slots, endpoint)

    def pop_transferred(self, msg: KVMessage) -> None:
        """The prompt's KV arrived: write it into the preallocated slots, take the first token, ack, and join
        the running batch (or finish now, if that token already ends the request)."""
        req = next((r for r in self.disagg_decode_transfer_queue if r.bootstrap_room == msg.room), None)
        if req is None:
            logger.warning("KV for room %d arrived, but no request here waits for it", msg.room)
            return
        n = len(req.origin_input_ids)
        if msg.k.shape[1] != n:
            raise RuntimeError(f"room {msg.room}: {msg.k.shape[1]} KV rows arrived for a {n}-token prompt")
        slots = self.req_to_token_pool.req_to_token[req.req_pool_idx, :n]
        scatter_kv(self.token_to_kv_pool, slots, msg.k, msg.v)
        self.disagg_decode_transfer_queue.remove(req)
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
