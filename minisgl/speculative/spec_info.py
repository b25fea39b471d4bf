"""NgramVerifyInput: what a TARGET_VERIFY round carries besides the ScheduleBatch's own rows.

Each request contributes 1 + len(draft) rows: its last token (the row a plain decode would run) and its
draft tokens, as an extend over its KV. Row j's logits check draft j (and after the last accepted
draft they give the one bonus token). A request without a draft has one row, a plain decode step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from minisgl.scheduler.req import Req


@dataclass
class NgramVerifyInput:
    draft_tokens: list[list[int]]  # per request of the batch, in batch order ([] for a plain decode row)

    def num_rows(self) -> list[int]:
        return [1 + len(d) for d in self.draft_tokens]

    def row_starts(self) -> list[int]:
        starts, at = [], 0
        for n in self.num_rows():
            starts.append(at)
            at += n
        return starts

    def rows(self, reqs: list[Req]) -> tuple[list[Req], list[int]]:
        """The request of every row, and how many output tokens it will have before that row's token."""
        row_reqs, output_lens = [], []
        for req, n in zip(reqs, self.num_rows()):
            row_reqs += [req] * n
            output_lens += [len(req.output_ids) + j for j in range(n)]
        return row_reqs, output_lens
