"""NGRAMWorker: n-gram speculative decoding — propose, verify in one forward, accept.

A decode round normally runs one row per request and yields one token each. With drafts:

    prepare_for_verify     after prepare_for_decode: each greedy request gets up to K draft tokens
                           (ngram_match.py), one KV slot each, and the batch becomes TARGET_VERIFY —
                           per request its last token + drafts as extend rows over its KV
    (forward)              logits for every row; the sampler takes each row's argmax
    process_verify_result  per request: row j's token is appended; while it equals draft j, go on to
                           row j + 1. The first mismatch (or the row after the last draft) gives the
                           bonus token. Finish (EOS, stop string, max_new_tokens) stops it at once.
                           The KV slots of the rows after the last appended token are freed now.

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
from typing import TYPE_CHECKING, Protocol

import torch

from minisgl.model_executor.forward_batch_info import ForwardMode
from minisgl.speculative.ngram_match import match_ngram_draft
from minisgl.speculative.spec_info import NgramVerifyInput

if TYPE_CHECKING:
    from minisgl.mem_cache.cache_manager import CacheManager
    from minisgl.scheduler.req import Req
    from minisgl.scheduler.schedule_batch import ScheduleBatch
    from minisgl.scheduler.trace_collector import SchedulerTraceCollector
    from minisgl.scheduler.utils import GenerationBatchResult
    from minisgl.server_args import ServerArgs


class Scheduler(Protocol):
    """What accepting drafts uses of the scheduler (declared here, so this module imports no Scheduler)."""

    cache_manager: CacheManager
    trace_collector: SchedulerTraceCollector

    def append_token(self, req: Req, result: GenerationBatchResult, i: int) -> None: ...

    def stream_output(self, reqs: list[Req]) -> None: ...


@dataclass
class SpecStats:
    """Totals since start: what the benchmark prints (acceptance rate = accepted / proposed)."""

    verify_rounds: int = 0
    proposed: int = 0  # draft tokens sent to verification
    accepted: int = 0  # of those, equal to the model's own greedy token

    def acceptance_rate(self) -> float:
        return self.accepted / self.proposed if self.proposed else 0.0


@dataclass
class VerifyOutcome:
    """One TARGET_VERIFY round, per request in batch order (the trace reads it)."""

    draft_lens: list[int]
    accepted_lens: list[int]  # drafts equal to the model's token
    appended_lens: list[int]  # tokens appended (accepted + bonus, fewer when the request finished)


class NGRAMWorker:
    def __init__(self, server_args: ServerArgs):
        self.num_draft_tokens = server_args.speculative_num_draft_tokens
        self.adaptive = not server_args.disable_adaptive_draft
        self.min_window = server_args.speculative_ngram_min_match_window_size
        self.max_window = server_args.speculative_ngram_max_match_window_size
        self.stats = SpecStats()

    # ---- propose ----------------------------------------------------------------------------------
    def propose(self, req: Req, room: int) -> list[int]:
        """Drafts for one request: greedy only, and never more than its draft limit, than its remaining output
        allows (the bonus token needs one of those) or than the free KV slots (room)."""
        if not req.sampling_params.is_greedy or req.to_abort:
            return []
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

    # ---- accept -----------------------------------------------------------------------------------
    def process_verify_result(self, sched: Scheduler, batch: ScheduleBatch,
                              result: GenerationBatchResult) -> None:
        spec = batch.spec_info
        outcome = VerifyOutcome([], [], [])
        for req, draft, start in zip(batch.reqs, spec.draft_tokens, spec.row_starts()):
            accepted = appended = 0
            for j in range(len(draft) + 1):
                sched.append_token(req, result, start + j)
                appended += 1
                matched = j < len(draft) and draft[j] == result.next_token_ids[start + j]
                accepted += matched
                if req.finished() or not matched:
                    break
            # rows after the last appended token computed KV for tokens the request will not have
            rejected = batch.out_cache_loc[start + appended : start + 1 + len(draft)]
            sched.cache_manager.free_rejected_draft_slots(rejected)
            if req.finished():
                sched.cache_manager.cache_finished_req(req)
            if draft and self.adaptive:
                req.spec_draft_limit = self.next_draft_limit(req.spec_draft_limit, len(draft), accepted)
            outcome.draft_lens.append(len(draft))
            outcome.accepted_lens.append(accepted)
            outcome.appended_lens.append(appended)
        self.stats.verify_rounds += 1
        self.stats.proposed += sum(outcome.draft_lens)
        self.stats.accepted += sum(outcome.accepted_lens)
        sched.trace_collector.spec_verified(batch, outcome)
        sched.trace_collector.results_processed()
        sched.stream_output(batch.reqs)
        batch.forward_mode, batch.spec_info = ForwardMode.DECODE, None  # the running batch decodes next round
        batch.filter_batch()
