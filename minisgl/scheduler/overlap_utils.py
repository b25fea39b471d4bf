"""FutureMap: the tokens a launched round will sample, named before they exist (SGLang's overlap_utils.py).

With the overlap scheduler, round N+1 is formed while round N's forward still runs, so a decoding
request's next input id is not known yet. The scheduler gives each of round N's sampled rows a future
index k and writes -k where round N+1 needs that token. The forward thread, which runs the rounds in
order, stores round N's tokens at their indices when sampling is done (store_to_future_map) and swaps the
placeholders in round N+1's input ids for them just before its forward (resolve_future_token_ids).

The indices go round a ring buffer: a placeholder is read by the very next round only, so a ring a few
batches long is never overwritten while one is still unread.

Round N's result comes back while round N+1 runs, one round late; split_launched_rows says which of its rows
still count by then.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from minisgl.scheduler.req import Req


class FutureMap:
    def __init__(self, max_running_requests: int):
        # room for three batches in flight (launched, being formed, being processed)
        self.size = 3 * max_running_requests + 1
        self.future_ct = 0
        # index 0 unused: -0 is no placeholder
        self.token_ids_buf = torch.zeros(self.size + 1, dtype=torch.int64)

    def alloc_future_indices(self, bs: int) -> list[int]:
        """bs fresh indices (1..size, round robin); the scheduler uses -index as the placeholder."""
        start = self.future_ct
        self.future_ct = (self.future_ct + bs) % self.size
        return [(start + i) % self.size + 1 for i in range(bs)]

    def resolve_future_token_ids(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Every negative id -k becomes the token stored at index k; other ids stay."""
        return torch.where(input_ids < 0, self.token_ids_buf[torch.clamp(-input_ids, min=0)], input_ids)

    def store_to_future_map(self, future_indices: list[int], next_token_ids: list[int]) -> None:
        self.token_ids_buf[future_indices] = torch.tensor(next_token_ids, dtype=torch.int64)


def split_launched_rows(reqs: list[Req], placeholders: list[int], chunked_req: Req | None
                        ) -> tuple[list[int], list[int]]:
    """Round N's rows, processed one round late: (keep, late), two lists of row indices in batch order.

    A request's row is still wanted if the oldest of its future_token_ids is this row's placeholder: the
    row is consumed (that placeholder popped) and kept, or, if the request finished meanwhile (its finish
    was seen in round N-1's result, after round N was launched), it goes to `late` (its KV slot is freed,
    its token dropped). A row whose placeholder is gone belongs to a request retracted while the round ran:
    in neither list. The chunked request's row (an intermediate chunk, it sampled nothing) is always kept.
    """
    keep: list[int] = []
    late: list[int] = []
    for i, req in enumerate(reqs):
        if req is chunked_req:
            keep.append(i)
            continue
        if not req.future_token_ids or req.future_token_ids[0] != placeholders[i]:
            continue  # retracted while this round ran: the token is recomputed when it resumes
        req.future_token_ids.pop(0)
        if req.finished():
            late.append(i)
        else:
            keep.append(i)
    return keep, late
