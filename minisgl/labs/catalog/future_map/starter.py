"""Lab future_map (your file). FutureMap: the tokens a launched round will sample, named before they exist;
and split_launched_rows: which rows of a round still count when its result comes back, a round late.

With --enable-overlap-schedule, round N+1 is formed while round N's forward still runs on the forward thread,
so a decoding request's next input id is not known yet. TpModelWorkerClient (tp_worker_overlap_thread.py)
asks your FutureMap for one index k per row of round N (alloc_future_indices) and hands the scheduler -k:
the placeholder it writes where round N+1 needs that token (Req.future_token_ids). The forward thread,
which runs the rounds strictly in order,

    stores round N's sampled tokens at their indices right after its sampling (store_to_future_map), and
    swaps every placeholder in round N+1's input ids for its token just before that forward
    (resolve_future_token_ids).

The indices go round a ring: a placeholder is read by the next round only, so a ring of three batches
(launched, being formed, being processed) is never overwritten while one is still unread.

Round N's result is processed while round N+1 runs (process_batch_result_overlap, scheduler_overlap.py).
By then a request may have finished (its finish was seen in round N-1's result, after round N had been
launched with a row for it) or been retracted (its placeholders dropped). split_launched_rows sorts the
round's rows: kept (their tokens are appended), late (their KV slot is freed, their token dropped), or
neither (the retracted).

Your class inherits from the engine's FutureMap only its name and docstrings: you write all four methods,
and the function. The trace shows your placeholders as the negative input_ids of each sched.batch_formed,
your resolved tokens in what the model then samples, and your late rows as kv.free with reason finished.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch  # noqa: F401  (the buffer and resolve use it)

from minisgl.scheduler.overlap_utils import FutureMap as EngineFutureMap

if TYPE_CHECKING:
    from minisgl.scheduler.req import Req


class FutureMap(EngineFutureMap):
    def __init__(self, max_running_requests: int):
        """The ring and its buffer.

        self.size        how many indices the ring has: room for three batches of max_running_requests
                         rows, plus one (3 * max_running_requests + 1)
        self.future_ct   where the next allocation starts (0 .. size - 1), 0 at first
        self.token_ids_buf   an int64 tensor of zeros with a slot for every index 1 .. size; index 0 is
                         never handed out (-0 would be no placeholder), so it has size + 1 entries
        """
        raise NotImplementedError("TODO: __init__")

    def alloc_future_indices(self, bs: int) -> list[int]:
        """bs fresh indices, round robin: the bs indices after the last ones handed out, each in 1 .. size
        (after index size comes index 1 again). Advance future_ct by bs, wrapping at size."""
        raise NotImplementedError("TODO: alloc_future_indices")

    def resolve_future_token_ids(self, input_ids: torch.Tensor) -> torch.Tensor:
        """A new tensor: every negative id -k becomes the token stored at index k; the other ids stay.
        (One expression with torch.where; clamp the indices you read, so a positive id reads index 0.)"""
        raise NotImplementedError("TODO: resolve_future_token_ids")

    def store_to_future_map(self, future_indices: list[int], next_token_ids: list[int]) -> None:
        """Store each sampled token at its index: next_token_ids[i] at future_indices[i]."""
        raise NotImplementedError("TODO: store_to_future_map")


def split_launched_rows(reqs: list[Req], placeholders: list[int], chunked_req: Req | None
                        ) -> tuple[list[int], list[int]]:
    """Round N's rows, processed one round late: (keep, late), two lists of row indices in batch order.

    reqs[i] ran row i of the round, whose placeholder was placeholders[i]; each request's
    req.future_token_ids lists its placeholders not yet processed, oldest first.
    - The chunked request's row (chunked_req: an intermediate chunk, it sampled nothing) is always kept.
    - A row whose placeholder is not the oldest of its request's future_token_ids (or the list is empty)
      belongs to a request retracted while the round ran: in neither list, and nothing popped.
    - Otherwise pop that oldest placeholder (the row is consumed), then: if req.finished(), the row ran
      after the request's end and goes to `late`; if not, to `keep`.
    """
    raise NotImplementedError("TODO: split_launched_rows")
