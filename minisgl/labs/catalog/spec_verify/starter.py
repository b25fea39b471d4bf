"""Lab spec_verify: the verify step of n-gram speculative decoding.

With --speculative-algorithm NGRAM the scheduler runs its batches through NGRAMWorker
(minisgl/speculative/ngram_worker.py), which wraps the target model's worker. In a decode round it:

    prepare_for_verify   gives each greedy request up to its draft limit of draft tokens (copied from an
                         earlier n-gram match in its own tokens), one KV slot each; the batch becomes
                         TARGET_VERIFY: per request, its last token's row, then one row per draft
    (target forward)     the model scores every row; the sampler takes each row's argmax
    verify               YOU: how many drafts each request keeps, the KV of the rows it will not keep,
                         its next draft limit, and the batch back to DECODE

Then the scheduler appends each request's accept_len + 1 tokens (GenerationBatchResult.rows_of), stopping
at a finish, as it appends one token in a plain decode round.

You write two functions: accept_lengths (pure) and verify, which the lab installs as NGRAMWorker's method.
Neither records the trace: the scheduler's trace collector reads what verify leaves in the result and the
KV moves the CacheManager journals.
"""

from __future__ import annotations

from minisgl.model_executor.forward_batch_info import ForwardMode  # noqa: F401  (verify resets the batch)


def accept_lengths(draft_tokens: list[list[int]], next_token_ids: list[int]) -> list[int]:
    """Per request, how many of its drafts are accepted.

    next_token_ids has one token per row: request 0's 1 + len(draft_tokens[0]) rows, then request 1's, and
    so on. Row j of a request is the model's token after its last token and drafts 0 .. j-1, so draft j is
    right exactly when it equals row j's token. A request keeps the longest run of right drafts from its
    first one on: drafts [5, 6, 7] against rows [5, 6, 8, x] keep 2 (5 and 6; 8 is the model's own token
    after them, the bonus token). A request with no draft keeps 0.
    """
    raise NotImplementedError("TODO: accept_lengths")


def verify(self, batch, result) -> None:
    """After the verify forward: accept, free the rejected rows' KV, earn the next draft limit, reset.

    You have:
      batch.spec_info.draft_tokens   per request of batch.reqs, its drafts (batch order; [] for none)
      batch.out_cache_loc            one KV slot per row, in row order (the order of next_token_ids)
      result.next_token_ids          one token per row
      self.cache_manager.free_rejected_draft_slots(slots)   gives slots back (trace: kv.free, rejected)
      self.adaptive, self.next_draft_limit(limit, drafted, accepted), req.spec_draft_limit
      self.stats                     SpecStats: verify_rounds, proposed, accepted (totals since start)

    Do, in this order:
      1. result.draft_lens = each request's number of drafts; result.accept_lens = accept_lengths(...).
         From then on result.rows_of(i) is the range of rows request i takes tokens from (1 + accepted).
      2. For each request, in batch order: free the KV slots of its rows after those (its rejected
         drafts'), one free_rejected_draft_slots call per request (an empty tensor is fine). With
         self.adaptive, and only if it had drafts: req.spec_draft_limit = self.next_draft_limit(
         req.spec_draft_limit, len(draft), accepted).
      3. self.stats: one more verify round; add the drafts proposed and accepted this round.
      4. The running batch decodes next round: batch.forward_mode = ForwardMode.DECODE and
         batch.spec_info = None.
    """
    raise NotImplementedError("TODO: verify")
