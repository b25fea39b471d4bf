"""Lab add_chunked_req (your file). PrefillAdder.add_chunked_req: give a chunked prompt its next chunk.

A prompt longer than --chunked-prefill-size is prefilled a chunk per round. Its FIRST chunk is cut when it
is admitted from the waiting queue (that is `add_one_req`, the engine's own here); the scheduler then keeps
the request in `Scheduler.chunked_req`, outside the waiting queue and outside the running batch. At the
start of every later round, before the waiting queue is walked, `get_new_batch_prefill` does:

    self.chunked_req.init_next_round_input()                         # fill_ids = the whole prompt again
    self.chunked_req = adder.add_chunked_req(self.chunked_req)       # your function

Between rounds `cache_unfinished_req` put the chunks computed so far into the prefix cache and made them
the request's prefix, so on entry:
    req.fill_ids          every token of the prompt (plus outputs; there are none yet)
    req.prefix_indices    the KV slots of the chunks already computed: len(req.prefix_indices) tokens done
    req.extend_input_len  the tokens still to compute: len(fill_ids) - len(prefix_indices)
Its prefix is already locked (cache_unfinished_req moved the lock), so there is nothing to lock here.

The engine installs this function as the PrefillAdder's method, so `self` is the adder, with this round's
budgets (rem_chunk_tokens, rem_input_tokens, rem_kv_room, rem_total_tokens, rem_running; chunking is on,
so rem_chunk_tokens is a number) and the helpers already in the class (engine's code, do not rewrite them;
they keep the record the trace turns into `sched.admission` events):
    self._look_at(req, "chunked_req") -> rec     opens this candidate's record (budgets before, lengths)
    self._refuse(rec, budget, result) -> result  records a refusal by `budget` and returns `result`
    self._admit(rec, req, end, chunked, budget=None)
                                                 sets req's extend range to [len(prefix_indices), end) (it
                                                 cuts fill_ids at `end`) and spends it: rem_input_tokens,
                                                 rem_chunk_tokens, rem_total_tokens and rem_kv_room each lose
                                                 extend_input_len, rem_running loses 1; appends req to
                                                 can_run_list; records the decision ("chunked" if `chunked`,
                                                 else "admitted"), `budget`, and the budgets after
    self._chunk_limit() -> int                   rows one prompt may take now: min(rem_input_tokens,
                                                 rem_chunk_tokens), at least 1
    self._chunk_budget() -> str                  the name of the smallest of chunk rows, round rows and KV
                                                 room: the budget that cut a chunk

The lesson page lessons/docs/lessons/chunked-retract-mixed.md follows one chunked prompt round by round.
"""

from __future__ import annotations

from minisgl.scheduler.req import Req
from minisgl.scheduler.schedule_policy import AddReqResult  # noqa: F401  (_refuse takes one of its members)


def add_chunked_req(self, req: Req) -> Req | None:
    """Admit the next chunk of `req`; return `req` while chunks are left after it, None once the last is in.

    - This round's chunk may take at most the chunk limit rows, and no more than the KV room left.
      No room at all: refuse it by "kv_cache" (AddReqResult.NO_TOKEN) and return `req`: it stays the
      chunked request and tries again next round.
    - The chunk starts where the computed prefix ends and takes as many of the remaining tokens as the
      limit allows; its end is a position in fill_ids.
    - If the chunk does not reach the end of fill_ids, it is an intermediate chunk: admit it as chunked,
      naming the budget that cut it, and return `req`. Otherwise it is the last chunk: admit it as a
      whole (no budget) and return None: the request is no longer being chunked, and from the next round
      it decodes with the others.

    Unlike a new request, the chunked request reserves no future tokens here.
    """
    raise NotImplementedError("TODO: add_chunked_req")
