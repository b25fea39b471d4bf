"""The scheduler state that replay rebuilds from a trace: requests, batch rows, queues, KV owners.

Plain frozen-ish records, so a TUI or a test can hold a round's state without it changing underneath.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

TREE = "(tree)"  # owner of a KV slot held by the radix tree
UNASSIGNED = "(allocated)"  # owner of a KV slot taken by kv.alloc but not yet kv.assigned to a request

WAITING, RUNNING, FINISHED, ABORTED, RETRACTED = "waiting", "running", "finished", "aborted", "retracted"
TRANSFERRING = "transferring"  # PD prefill: its KV sent to the decode server, waiting for the ack (no batch)
LEFT_BATCH = (FINISHED, ABORTED, TRANSFERRING)  # statuses of a request that does not join running_batch


@dataclass
class ReqState:
    """One request's progress as of some point of the trace."""

    rid: str
    input_len: int = 0
    prefix_len: int = 0  # the cached prefix found at the latest admission attempt
    cached_tokens: int = 0  # prompt tokens the cache served (sched.finished's, else the first admission's)
    computed_len: int = 0  # prompt tokens whose KV is computed (end of the latest extend_range)
    output_len: int = 0
    output_ids: list[int] = field(default_factory=list)
    status: str = WAITING
    finish_reason: dict[str, Any] | None = None
    created_ns: int | None = None
    enqueued_ns: int | None = None  # the first sched.enqueued
    admitted_ns: int | None = None  # the first admission (admitted or chunked)
    token_ns: list[int] = field(default_factory=list)  # wall time of each output token
    finished_ns: int | None = None
    prefill_rounds: list[int] = field(default_factory=list)
    decode_rounds: list[int] = field(default_factory=list)

    def copy(self) -> ReqState:
        lists = ("output_ids", "token_ns", "prefill_rounds", "decode_rounds")
        return ReqState(**{**self.__dict__, **{k: list(getattr(self, k)) for k in lists}})


@dataclass
class BatchRow:
    """One row of a round's batch. cached rows are prefix tokens served from the KV cache: they are not
    computed this round (no forward row), they are shown so a request's whole sequence is visible."""

    rid: str
    position: int
    input_id: int | None
    slot: int | None
    cached: bool
    sampled: bool  # this row's logits picked the request's next token
    token: int | None = None  # the token sampled from it, when the trace has it (level 2)
    draft: bool = False  # TARGET_VERIFY: a draft token's row (speculative decoding), kept only if accepted


@dataclass
class RoundBatch:
    """The batch of one round, as sched.batch_formed (and model.forward for its duration) describe it."""

    round: int | None
    mode: str
    rids: list[str]
    seq_lens: list[int]
    prefix_lens: list[int]
    extend_lens: list[int]
    out_cache_loc: list[int]
    req_pool_indices: list[int]
    rows: list[BatchRow]
    duration_ms: float | None = None
    formed_ns: int = 0

    def copy(self) -> RoundBatch:
        return RoundBatch(**{**self.__dict__, "rows": [BatchRow(**r.__dict__) for r in self.rows]})

    @property
    def forward_rows(self) -> list[BatchRow]:
        """The rows the model computes this round (cached prefix rows left out)."""
        return [r for r in self.rows if not r.cached]


@dataclass
class RoundState:
    """The scheduler as of one event: after a round's sched.round_end, or mid-round for state_at."""

    round: int | None
    event_index: int
    time_ns: int
    waiting: list[str]
    running: list[str]
    chunked: str | None
    reqs: dict[str, ReqState]
    slot_owner: dict[int, str]  # every KV slot that is not free -> a rid, TREE or UNASSIGNED
    tree: list[dict[str, Any]]  # the latest cache.tree nodes
    kv_size: int | None  # usable KV slots (sched.config), None if the trace does not say
    batch: RoundBatch | None

    @property
    def free_slots(self) -> int | None:
        return None if self.kv_size is None else self.kv_size - len(self.slot_owner)

    @property
    def cached_slots(self) -> int:
        return sum(1 for owner in self.slot_owner.values() if owner == TREE)

    def slots_of(self, owner: str) -> list[int]:
        """The KV slots one owner (a rid, TREE or UNASSIGNED) holds, ascending."""
        return sorted(s for s, o in self.slot_owner.items() if o == owner)


class ReqCopies:
    """Copy-on-write copies of the requests for snapshots: a request no event touched since the last
    snapshot shares that copy, so a round's snapshot costs O(requests touched), not O(requests seen)."""

    def __init__(self) -> None:
        self._dirty: set[str] = set()  # rids changed since the last snapshot
        self._copies: dict[str, ReqState] = {}

    def touch(self, rid: str | None, rids: list[str] | None, batch: RoundBatch | None) -> None:
        """After an event: the requests its handler may have changed, its own and the current batch's."""
        if rid:
            self._dirty.add(rid)
        if rids:
            self._dirty.update(rids)
        if batch is not None:
            self._dirty.update(batch.rids)

    def take(self, reqs: dict[str, ReqState]) -> dict[str, ReqState]:
        """Fresh copies of the requests changed (or new) since the last snapshot; the rest keep theirs."""
        stale = (self._dirty | (reqs.keys() - self._copies.keys())) & reqs.keys()
        for rid in stale:
            self._copies[rid] = reqs[rid].copy()
        self._dirty.clear()
        return {rid: self._copies[rid] for rid in reqs}
