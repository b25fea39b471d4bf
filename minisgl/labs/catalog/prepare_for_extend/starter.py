"""Lab prepare_for_extend (your file). ScheduleBatch.prepare_for_extend: turn the requests the PrefillAdder
admitted into this round's plan, the rows the model will compute.

By the time it is called, admission has done its part. Every request in `self.reqs` has

    req.fill_ids          the tokens whose KV will exist once this round has run
                          (prompt, plus the output tokens of a request that was retracted and resumes)
    req.prefix_indices    the KV slots of fill_ids[:prefix_len], already computed
                          (a radix-cache hit, or the earlier chunks of a chunked prompt)
    req.extend_input_len  how many tokens after the prefix this round computes
    req.req_pool_idx      its row in req_to_token, or None if it has none yet

and you fill in the batch's fields (see the ScheduleBatch dataclass in minisgl/scheduler/schedule_batch.py):

    per request: req_pool_indices, prefix_lens, extend_lens, seq_lens
    per row:     input_ids (the tokens to compute) and out_cache_loc (the KV slot each row writes)

plus, for every request, its row of the req_to_token table: position p -> KV slot. The lesson page
batch-rows walks through the R1/R2 round of the shared_prefix scenario: nine rows, R2 reading its first three
tokens from R0's cached slots.

This file defines one module-level function taking `self`; the lab installs it on ScheduleBatch as the
method `prepare_for_extend`. Useful things on `self`:

    self.reqs                              the admitted requests, in batch order
    self.req_to_token_pool.alloc(1)        -> [request slot]  (a list of one int)
    self.req_to_token_pool.req_to_token    the table, a [max requests, max context] int64 tensor
    self.alloc_token_slots(n)              -> n KV slots (a tensor); evicts radix-cache leaves if short
"""

from __future__ import annotations

import torch  # noqa: F401  (out_cache_loc is a tensor; req_to_token is one too)

from minisgl.model_executor.forward_batch_info import ForwardMode


def prepare_for_extend(self) -> None:
    """Give every request its request slot and this round's KV slots, and write req_to_token.

    1. `self.forward_mode = ForwardMode.EXTEND` (done below).
    2. A request with `req_pool_idx is None` takes a request slot: `(req.req_pool_idx,) =
       self.req_to_token_pool.alloc(1)`, in batch order. One that has a slot (a chunked prompt on its next
       chunk) keeps it.
    3. The per-request lists, in batch order:
         prefix_lens[i]      = len(req.prefix_indices)
         extend_lens[i]      = req.extend_input_len
         seq_lens[i]         = prefix_lens[i] + extend_lens[i]
         req_pool_indices[i] = req.req_pool_idx
    4. input_ids: one int per row, each request's `fill_ids[prefix_len:]`, requests one after another.
    5. out_cache_loc: the round's KV slots, taken with ONE call `self.alloc_token_slots(sum(extend_lens))`
       (each call is one kv.alloc event in the trace). Rows take them in order: the first request's rows get
       the first extend_lens[0] slots, and so on.
    6. req_to_token, for each request's row (`req_to_token[req.req_pool_idx]`):
         columns [0, prefix_len)       = req.prefix_indices  (computed earlier; the attention reads them)
         columns [prefix_len, seq_len) = this request's slots from out_cache_loc
    """
    self.forward_mode = ForwardMode.EXTEND
    raise NotImplementedError("TODO: prepare_for_extend (steps 2-6 of the docstring)")
