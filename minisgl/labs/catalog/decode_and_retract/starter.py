"""Lab decode_and_retract (your file). ScheduleBatch.prepare_for_decode and ScheduleBatch.retract_decode: the
running requests' round, one row each, and what the scheduler does when there is no KV slot for every row.

Every decode round the scheduler's update_running_batch (minisgl/scheduler/scheduler.py) does

    batch.filter_batch()                    # finished requests leave
    if not batch.check_decode_mem():        # one free-or-evictable KV slot per request?
        retracted = batch.retract_decode()  # YOURS: take requests out until the rest fit
        waiting_queue = retracted + waiting_queue
    batch.prepare_for_decode()              # YOURS: one row, one new KV slot per request

A running request `req` has its prompt and all its output tokens but the newest one in the KV cache: the
newest token, req.output_ids[-1], was sampled last round and has not been through the model yet. Its row of
req_to_token (req_to_token[req.req_pool_idx]) holds the KV slots of positions 0 .. req.seqlen - 2.

Retraction is explained in the lesson chunked-retract-mixed ("Retraction"); the scenario `retract` runs
A and B in a pool too small for both to finish side by side.

This file defines two module-level functions taking `self`; the lab installs them on ScheduleBatch as its
methods. Useful things on `self` (minisgl/scheduler/schedule_batch.py):

    self.reqs                              the running requests, in batch order
    self.alloc_token_slots(n)              -> n KV slots (a tensor); evicts radix-cache leaves if short
    self.req_to_token_pool.req_to_token    the table, a [max requests, max context] int64 tensor
    self.check_decode_mem()                True when free + evictable slots >= len(self.reqs)
    self.cache_manager.cache_finished_req(req, free_reason=...)
                                           gives a request's KV to the radix tree (or, without one, back to
                                           the pool), unlocks its prefix and frees its request slot
    req.reset_for_retract()                clears what a retracted request held (its slot, its prefix)
"""

from __future__ import annotations

import torch  # noqa: F401  (out_cache_loc is a tensor; req_to_token is one too)

from minisgl.mem_cache.memory_pool import KVCacheExhausted  # noqa: F401  (retract_decode raises it)
from minisgl.model_executor.forward_batch_info import ForwardMode
from minisgl.scheduler.req import Req


def prepare_for_decode(self) -> None:
    """Each request feeds its newest token: one row, one new KV slot, at position seq_len - 1.

    Set, in batch order (the trace's sched.batch_formed records every one of them):
      forward_mode       ForwardMode.DECODE (done below)
      input_ids          each request's newest token, req.output_ids[-1]
      seq_lens           each request's length with that token, req.seqlen
      req_pool_indices   each request's req_pool_idx
      prefix_lens, extend_lens   empty lists: a decode row has no extend range
      out_cache_loc      the round's new KV slots, one per request, from ONE self.alloc_token_slots(...) call
    and write each new slot into req_to_token, in the request's row at column seq_len - 1.
    """
    self.forward_mode = ForwardMode.DECODE
    raise NotImplementedError("TODO: prepare_for_decode")


def retract_decode(self) -> list[Req]:
    """Take requests out until the rest have room for their next token; return those taken.

    Victims: fewest output tokens first (the least work lost), then the longest prompt (it frees the most),
    then rid, so the same workload always retracts the same requests. Sort once, then take victims from the
    front of that order while `self.check_decode_mem()` is False.

    For each victim, in this order:
      - remove it from self.reqs (the others keep their order);
      - self.cache_manager.cache_finished_req(victim, free_reason="retracted"): its KV is kept as evictable
        radix-cache entries (a resume may reuse it) or, without a radix cache, freed;
      - victim.reset_for_retract();
      - add it to the list you return.
    If a single request is left and it still has no room, raise KVCacheExhausted: nothing else can make room.
    """
    raise NotImplementedError("TODO: retract_decode")
