"""Admission: in which order waiting requests are considered, and which of them fit this round.

PrefillAdder holds this round's budgets and spends them one request at a time:
- rem_input_tokens: prefill rows per round (--max-prefill-tokens)
- rem_chunk_tokens: rows a single prompt may take this round (--chunked-prefill-size)
- rem_total_tokens: free + evictable KV slots, minus what running requests will still need
- rem_kv_room: free + evictable KV slots, the hard limit
- rem_running: requests that may still join the running ones (--max-running-requests)
It emits no events itself: its decisions and the budgets behind them are data (`log`, `initial`),
which the scheduler's hooks turn into trace events.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum, auto

from minisgl.scheduler.req import Req

# Reserve at most this many future tokens per request when budgeting KV room (as SGLang does).
CLIP_MAX_NEW_TOKENS = 4096


class SchedulePolicy:
    def __init__(self, policy: str, tree_cache, disable_radix_cache: bool):
        if policy not in ("fcfs", "lpm"):
            raise ValueError(f"--schedule-policy must be fcfs or lpm, not {policy!r}")
        # lpm needs prefix matches; without a radix cache every match is empty, so fall back to fcfs
        self.policy = "fcfs" if disable_radix_cache else policy
        self.tree_cache = tree_cache

    def calc_priority(self, waiting_queue: list[Req]) -> None:
        """Reorder waiting_queue in place. fcfs: arrival order. lpm: longest cached prefix first."""
        if self.policy == "lpm":
            for req in waiting_queue:
                req.init_next_round_input(self.tree_cache)
            waiting_queue.sort(key=lambda r: -len(r.prefix_indices))  # stable: ties keep arrival order


class AddReqResult(Enum):
    CONTINUE = auto()  # admitted; try the next one
    NO_TOKEN = auto()  # not enough KV room
    OTHER = auto()  # a round budget (rows, chunk, running requests) is spent


BUDGETS = ("rem_total_tokens", "rem_input_tokens", "rem_chunk_tokens", "rem_kv_room", "rem_running")


@dataclass
class AdderInit:
    """How this round's budgets started: rem_total_tokens = available + evictable - sum(future * ratio)."""

    available_size: int
    evictable_size: int
    new_token_ratio: float
    running_rids: list[str]
    running_future_tokens: list[int]  # what each running request may still produce
    reserved_tokens: float  # sum(running_future_tokens) * new_token_ratio
    mixed_decode_rows: int  # rows the running requests take in a MIXED batch: rem_input_tokens starts lower
    budgets: dict[str, float | int | None]


@dataclass
class AdmissionRecord:
    """One candidate the adder looked at: the budgets before and after, what it asked for, the decision."""

    rid: str
    source: str  # "chunked_req" (add_chunked_req) or "waiting_queue" (add_one_req)
    before: dict[str, float | int | None]
    extend_input_len: int  # prompt tokens not in the KV cache yet, before any chunk cut
    future_tokens: int  # output tokens it may still produce; reserved only when admitted whole from the queue
    prefix_locked: int = 0  # cached prefix slots its lock took out of the evictable ones
    decision: str = ""  # admitted, chunked or refused
    budget: str | None = None  # refused: the budget that refused it; chunked: the budget that cut the chunk
    need: int | None = None  # refused on kv_cache: extend_input_len + future_tokens
    extend_range: tuple[int, int] | None = None
    after: dict[str, float | int | None] = field(default_factory=dict)


class PrefillAdder:
    def __init__(self, tree_cache, token_to_kv_pool, running_reqs: list[Req], new_token_ratio: float,
                 max_prefill_tokens: int, chunked_prefill_size: int | None, max_running_requests: int,
                 mixed_decode_rows: int = 0, has_chunked_req: bool = False):
        self.tree_cache = tree_cache
        available, evictable = token_to_kv_pool.available_size(), tree_cache.evictable_size()
        future = [_future_tokens(r) for r in running_reqs]
        reserved = sum(f * new_token_ratio for f in future)
        self.rem_input_tokens = max_prefill_tokens - mixed_decode_rows
        self.rem_chunk_tokens = chunked_prefill_size
        self.rem_total_tokens = available + evictable - reserved
        self.rem_kv_room = available + evictable  # hard limit
        self.rem_running = max_running_requests - len(running_reqs)
        self.nothing_running = not running_reqs and not has_chunked_req
        self.can_run_list: list[Req] = []
        self.new_chunked_req: Req | None = None
        self.initial = AdderInit(available, evictable, new_token_ratio, [r.rid for r in running_reqs], future,
                                 reserved, mixed_decode_rows, self.budgets())
        self.log: list[AdmissionRecord] = []  # one per candidate, in the order they were looked at

    def budgets(self) -> dict[str, float | int | None]:
        return {name: getattr(self, name) for name in BUDGETS}

    def add_chunked_req(self, req: Req) -> Req | None:
        """Continue a prompt that an earlier round chunked. Returns it if it is still unfinished."""
        rec = self._look_at(req, "chunked_req")
        limit = min(self._chunk_limit(), self.rem_kv_room)
        if limit <= 0:
            self._refuse(rec, "kv_cache", AddReqResult.NO_TOKEN)
            return req
        full_len = len(req.fill_ids)
        end = len(req.prefix_indices) + min(req.extend_input_len, limit)
        chunked = end < full_len
        self._admit(rec, req, end, chunked, budget=self._chunk_budget() if chunked else None)
        return req if chunked else None

    def add_one_req(self, req: Req) -> AddReqResult:
        rec = self._look_at(req, "waiting_queue")
        if self.rem_running <= 0:
            return self._refuse(rec, "max_running_requests", AddReqResult.OTHER)
        if self.rem_input_tokens <= 0 or (self.can_run_list and req.extend_input_len > self.rem_input_tokens):
            return self._refuse(rec, "max_prefill_tokens", AddReqResult.OTHER)
        if self.rem_chunk_tokens is not None and self.rem_chunk_tokens <= 0:
            return self._refuse(rec, "chunked_prefill_size", AddReqResult.OTHER)
        need = req.extend_input_len + rec.future_tokens
        # the first request of an idle engine always fits (its max_new_tokens was clamped to the pool)
        idle = self.nothing_running and not self.can_run_list
        if (need > self.rem_total_tokens and not idle) or self.rem_kv_room < 1:
            rec.need = need
            return self._refuse(rec, "kv_cache", AddReqResult.NO_TOKEN)

        # a locked prefix is no longer evictable: both room counters shrink by it
        self._spend_lock(rec, -self.tree_cache.inc_lock_ref(req.last_node))
        chunking = self.rem_chunk_tokens is not None
        if req.extend_input_len <= self.rem_kv_room and (
                not chunking or req.extend_input_len <= self._chunk_limit()):
            self.rem_total_tokens -= rec.future_tokens
            self._admit(rec, req, len(req.fill_ids), chunked=False)
            return AddReqResult.CONTINUE
        take = min(self._chunk_limit(), self.rem_kv_room) if chunking else 0
        if take <= 0:  # no chunking, or no room at all: it waits, and gives its lock back
            self._spend_lock(rec, -self.tree_cache.dec_lock_ref(req.last_node))
            rec.need = need
            return self._refuse(rec, "kv_cache", AddReqResult.NO_TOKEN)
        # too long for this round: take a chunk now, the rest in later rounds
        self._admit(rec, req, len(req.prefix_indices) + take, chunked=True, budget=self._chunk_budget())
        self.new_chunked_req = req
        return AddReqResult.OTHER

    def _chunk_limit(self) -> int:
        """Rows one prompt may take this round when chunking is on."""
        return max(1, min(self.rem_input_tokens, self.rem_chunk_tokens))

    def _chunk_budget(self) -> str:
        """The budget that cuts a chunk: the smallest of chunk rows, round rows and KV room left."""
        left = {"chunked_prefill_size": self.rem_chunk_tokens, "max_prefill_tokens": self.rem_input_tokens,
                "kv_cache": self.rem_kv_room}
        return min(left, key=left.__getitem__)

    def _look_at(self, req: Req, source: str) -> AdmissionRecord:
        rec = AdmissionRecord(req.rid, source, self.budgets(), req.extend_input_len, _future_tokens(req))
        self.log.append(rec)
        return rec

    def _spend_lock(self, rec: AdmissionRecord, slots: int) -> None:
        """Locked prefix slots stop being evictable, so both room counters lose them (negative: unlocked)."""
        self.rem_total_tokens -= slots
        self.rem_kv_room -= slots
        rec.prefix_locked += slots

    def _admit(self, rec: AdmissionRecord, req: Req, end: int, chunked: bool,
               budget: str | None = None) -> None:
        start = len(req.prefix_indices)
        req.set_extend_range(start, end)
        self.can_run_list.append(req)
        self.rem_running -= 1
        self.rem_kv_room -= req.extend_input_len
        self.rem_input_tokens -= req.extend_input_len
        self.rem_total_tokens -= req.extend_input_len
        if self.rem_chunk_tokens is not None:
            self.rem_chunk_tokens -= req.extend_input_len
        rec.decision, rec.budget, rec.extend_range = (
            "chunked" if chunked else "admitted", budget, (start, end))
        rec.after = self.budgets()

    def _refuse(self, rec: AdmissionRecord, budget: str, result: AddReqResult) -> AddReqResult:
        rec.decision, rec.budget, rec.after = "refused", budget, self.budgets()
        return result


def _future_tokens(req: Req) -> int:
    return min(req.sampling_params.max_new_tokens - len(req.output_ids), CLIP_MAX_NEW_TOKENS)
