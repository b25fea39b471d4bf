"""Lab add_one_req (your file). PrefillAdder.add_one_req: admit one waiting request this round, or refuse it.

Each round, `Scheduler.get_new_batch_prefill` builds a PrefillAdder and hands it the waiting queue one
request at a time (after `req.init_next_round_input(tree_cache)` has looked up its cached prefix). Your
`add_one_req` decides for ONE request: admit it whole (CONTINUE: the scheduler tries the next one), admit
its first chunk (OTHER: the walk stops), or refuse it (OTHER or NO_TOKEN: the walk stops). The engine
installs this function as the PrefillAdder's method, so `self` is the adder.

What you can read on `self` (the budgets; each is spent by every admitted request):
    rem_running        requests that may still join the running ones (--max-running-requests)
    rem_input_tokens   prefill rows left this round (--max-prefill-tokens)
    rem_chunk_tokens   rows one prompt may still take this round (--chunked-prefill-size);
                       None when chunked prefill is off
    rem_total_tokens   free + evictable KV slots, minus what the running requests will still need
                       (a float: the reservation is future tokens x new_token_ratio)
    rem_kv_room        free + evictable KV slots: the hard limit
    nothing_running    True when no request was running and none was being chunked at the round's start
    can_run_list       the requests admitted so far this round
    new_chunked_req    set it to the request whose first chunk you admit
    tree_cache         the prefix cache (inc_lock_ref / dec_lock_ref return the CHANGE in evictable size,
                       so locking a cached prefix returns minus its length, or 0)

and on `req`: extend_input_len (prompt tokens not cached yet), fill_ids (all its tokens this round),
prefix_indices (the KV slots of its cached prefix), last_node (the tree node where that prefix ends).

The helpers already in the class (engine's code, do not rewrite them; they keep the record the trace
turns into `sched.admission` events, so call them exactly where the decisions are taken):
    self._look_at(req, "waiting_queue") -> rec   opens this candidate's record: budgets before,
                                                 extend_input_len, and rec.future_tokens (the output tokens
                                                 it may still produce, clipped)
    self._refuse(rec, budget, result) -> result  records a refusal by `budget` (one of "max_running_requests",
                                                 "max_prefill_tokens", "chunked_prefill_size", "kv_cache")
                                                 and returns `result`
    self._admit(rec, req, end, chunked, budget=None)
                                                 sets req's extend range to [len(prefix_indices), end) and
                                                 spends it: rem_input_tokens, rem_chunk_tokens (when
                                                 chunking), rem_total_tokens and rem_kv_room each lose
                                                 extend_input_len, rem_running loses 1; appends req to
                                                 can_run_list; records the decision and the budgets after.
                                                 `end` is a position in fill_ids; `budget`, for a chunk, is
                                                 the one that cut it.
    self._spend_lock(rec, slots)                 a cached prefix of `slots` slots was locked (negative:
                                                 unlocked): rem_total_tokens and rem_kv_room lose them
    self._chunk_limit() -> int                   rows one prompt may take now: min(rem_input_tokens,
                                                 rem_chunk_tokens), at least 1 (only when chunking is on)
    self._chunk_budget() -> str                  the name of the smallest of chunk rows, round rows, KV room:
                                                 the budget that cut a chunk

The lesson page lessons/docs/lessons/admission.md walks through every budget on a real trace.
"""

from __future__ import annotations

from minisgl.scheduler.req import Req
from minisgl.scheduler.schedule_policy import AddReqResult


def add_one_req(self, req: Req) -> AddReqResult:
    """Admit `req` whole, admit its first chunk, or refuse it; the first budget that says no refuses it.

    Check the budgets in this order, refusing with the first that says no (nothing is spent on a refusal):

    1. request slots: none left -> refused by "max_running_requests" (AddReqResult.OTHER);
    2. prefill rows: none left, or a request was already admitted this round and this prompt's rows do
       not fit in the rows left -> "max_prefill_tokens" (OTHER). The round's first candidate is never
       refused for being long: it is chunked instead;
    3. the chunk: chunking is on and no chunk rows are left -> "chunked_prefill_size" (OTHER);
    4. KV room: its rows plus its future tokens (that sum goes into rec.need) must fit in
       rem_total_tokens, and there must be at least one slot of rem_kv_room -> else "kv_cache"
       (AddReqResult.NO_TOKEN). Exception: the first request of an idle engine (nothing running, nothing
       admitted yet) skips the rem_total_tokens check; its max_new_tokens was already clamped to the pool.

    It passed: lock its cached prefix in the tree (a locked prefix cannot be evicted, so it is room no
    longer: spend it with _spend_lock). Then:

    - its whole prompt fits (in rem_kv_room, and within the chunk limit when chunking is on): reserve its
      future tokens out of rem_total_tokens, admit all of fill_ids, return CONTINUE;
    - otherwise, with chunking on and room for at least one row (the chunk is the chunk limit, or the KV
      room if smaller): admit that many rows after the prefix as a chunk, name the budget that cut it,
      make it self.new_chunked_req, return OTHER. A chunk reserves no future tokens: the request will
      produce nothing until its last chunk;
    - otherwise it cannot run this round: unlock its prefix again (and give the room back), record
      rec.need, refuse by "kv_cache" (NO_TOKEN).
    """
    rec = self._look_at(req, "waiting_queue")  # noqa: F841  (the record every decision below writes into)
    raise NotImplementedError("TODO: add_one_req")
