"""NGRAMWorker: n-gram speculative decoding, a model worker wrapping the target model's worker (SGLang's
speculative/ngram_worker.py). The scheduler runs every batch through `self.model_worker`; with
--speculative-algorithm NGRAM that is this worker, and a decode round becomes propose -> verify -> accept:

    prepare_for_verify     the prepared DECODE batch: each greedy request gets up to K draft tokens
                           (ngram_match.py), one KV slot each, and the batch becomes TARGET_VERIFY —
                           per request its last token + drafts as extend rows over its KV
    (target forward)       the target worker's forward and sampler: a token for every row (its argmax)
    verify                 per request: draft j is accepted while it equals row j's token; the first
                           mismatch (or the row after the last draft) gives the bonus token, so the
                           request gets accept_len + 1 tokens. The KV slots of the rows after those
                           are freed now. The batch is a DECODE batch again for the next round.

The scheduler then appends each request's accept_len + 1 tokens as it appends one in a plain decode
round (output_processor.py), stopping at a finish (EOS, stop string, max_new_tokens).

Greedy outputs are the same tokens as without speculation: every appended token is the argmax of a row
whose inputs are all accepted tokens. Sampled requests (not greedy) run their one decode row.

How many drafts (adaptive, the default; --disable-adaptive-draft drafts K every round): a verified row is
not free (on a CPU, a part of a decode step each), so a request earns its drafts. It starts at 1 draft
token; a round whose drafts were all accepted doubles its limit (up to K), a rejection drops it to the
number accepted (at least 1). Text that repeats climbs to K within a few rounds; text that does not
verifies one draft now and then, at little cost. The limit depends only on the request's own tokens, so a
run is the same on every machine.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from minisgl.model_executor.forward_batch_info import ForwardMode
from minisgl.speculative.ngram_match import match_ngram_draft
from minisgl.speculative.spec_info import NgramVerifyInput

if TYPE_CHECKING:
    from minisgl.mem_cache.cache_manager import CacheManager
    from minisgl.scheduler.req import Req
    from minisgl.scheduler.schedule_batch import ScheduleBatch
    from minisgl.scheduler.tp_worker import TpModelWorker
    from minisgl.scheduler.utils import GenerationBatchResult
    from minisgl.server_args import ServerArgs


@dataclass
class SpecStats:
    """Totals since start: what the benchmark prints (acceptance rate = accepted / proposed)."""

    verify_rounds: int = 0
    proposed: int = 0  # draft tokens sent to verification
    accepted: int = 0  # of those, equal to the model's own greedy token

    def acceptance_rate(self) -> float:
        return self.accepted / self.proposed if self.proposed else 0.0


def accept_lengths(draft_tokens: list[list[int]], next_token_ids: list[int]) -> list[int]:
    """Per request, how many of its drafts are accepted: the longest run of drafts from the first on, each
    equal to the token its row gave (next_token_ids has 1 + len(draft) rows per request, in turn)."""
    accept_lens, start = [], 0
    for draft in draft_tokens:
        n = 0
        while n < len(draft) and draft[n] == next_token_ids[start + n]:
            n += 1
        accept_lens.append(n)
        start += 1 + len(draft)
    return accept_lens


class NGRAMWorker:
    def __init__(self, target_worker: TpModelWorker, cache_manager: CacheManager, server_args: ServerArgs):
        self.target_worker = target_worker
        self.cache_manager = cache_manager  # rejected drafts' KV slots go back through it
        self.num_draft_tokens = server_args.speculative_num_draft_tokens
        self.adaptive = not server_args.disable_adaptive_draft
        self.min_window = server_args.speculative_ngram_min_match_window_size
        self.max_window = server_args.speculative_ngram_max_match_window_size
        self.stats = SpecStats()

    def forward_batch_generation(self, batch: ScheduleBatch) -> GenerationBatchResult:
        if batch.forward_mode.is_decode():
            self.prepare_for_verify(batch)  # greedy requests with drafts: TARGET_VERIFY rows
        result = self.target_worker.forward_batch_generation(batch)
        if batch.spec_info is not None:
            self.verify(batch, result)
        return result

    # ---- propose ----------------------------------------------------------------------------------
    def propose(self, req: Req, room: int) -> list[int]:
        """Drafts for one request: greedy only, and never more than its draft limit, than its remaining output
        allows (the bonus token needs one of those) or than the free KV slots (room)."""
        if (not req.sampling_params.is_greedy or req.to_abort or req.grammar is not None
                or req.sampling_params.has_penalties):
            return []  # a grammar or a penalty follows the kept tokens only: no drafts for those
        if req.spec_draft_limit is None:
            req.spec_draft_limit = 1 if self.adaptive else self.num_draft_tokens
        k = min(req.spec_draft_limit, req.sampling_params.max_new_tokens - len(req.output_ids) - 1, room)
        if k <= 0:
            return []
        return match_ngram_draft(req.origin_input_ids + req.output_ids, k, self.min_window, self.max_window)

    def next_draft_limit(self, limit: int, drafted: int, accepted: int) -> int:
        """All drafts accepted: twice the limit (at most K); else the number accepted (at least 1)."""
        return min(self.num_draft_tokens, 2 * limit) if accepted == drafted else max(1, accepted)

    def prepare_for_verify(self, batch: ScheduleBatch) -> None:
        """Turn a prepared DECODE batch into TARGET_VERIFY if any request has drafts; else leave it."""
        batch.spec_info = None
        room = batch.token_to_kv_pool.available_size()  # free slots only: drafts never evict cached prefixes
        drafts = []
        for req in batch.reqs:
            drafts.append(self.propose(req, room))
            room -= len(drafts[-1])
        if not any(drafts):
            return
        draft_slots = batch.alloc_token_slots(sum(map(len, drafts)))
        row_of = batch.req_to_token_pool.req_to_token
        input_ids, out_cache_loc, prefix_lens, extend_lens, seq_lens = [], [], [], [], []
        at = 0
        for i, (req, draft) in enumerate(zip(batch.reqs, drafts)):
            seq, slots = batch.seq_lens[i], draft_slots[at : at + len(draft)]
            at += len(draft)
            row_of[req.req_pool_idx, seq : seq + len(draft)] = slots  # positions after the decode row's
            input_ids += [batch.input_ids[i], *draft]
            out_cache_loc += [batch.out_cache_loc[i : i + 1], slots]
            prefix_lens.append(seq - 1)
            extend_lens.append(1 + len(draft))
            seq_lens.append(seq + len(draft))
        batch.forward_mode = ForwardMode.TARGET_VERIFY
        batch.input_ids, batch.out_cache_loc = input_ids, torch.cat(out_cache_loc)
        batch.prefix_lens, batch.extend_lens, batch.seq_lens = prefix_lens, extend_lens, seq_lens
        batch.spec_info = NgramVerifyInput(drafts)

    # ---- verify and accept -------------------------------------------------------------------------
    def verify(self, batch: ScheduleBatch, result: GenerationBatchResult) -> None:
        """Accept each request's longest matching run of drafts, free the KV of the rows after its bonus
        token, and leave the batch a DECODE batch for the next round."""
        drafts = batch.spec_info.draft_tokens
        result.draft_lens = [len(d) for d in drafts]
        result.accept_lens = accept_lengths(drafts, result.next_token_ids)
        for i, (req, draft, accepted) in enumerate(zip(batch.reqs, drafts, result.accept_lens)):
            rows = result.rows_of(i)  # 1 + accepted rows give tokens; the rest computed KV for none
            rejected = batch.out_cache_loc[rows.stop : rows.start + 1 + len(draft)]
            self.cache_manager.free_rejected_draft_slots(rejected)
            if draft and self.adaptive:
                req.spec_draft_limit = self.next_draft_limit(req.spec_draft_limit, len(draft), accepted)
        self.stats.verify_rounds += 1
        self.stats.proposed += sum(result.draft_lens)
        self.stats.accepted += sum(result.accept_lens)
        batch.forward_mode, batch.spec_info = ForwardMode.DECODE, None  # the running batch decodes next round
