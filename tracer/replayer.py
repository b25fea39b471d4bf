"""The replay state machine: the scheduler's state rebuilt event by event from the trace's delta events.

Queues, request progress and KV ownership come from the events that change them (enqueued, admission,
batch_formed, retracted, finished, kv.*, cache.*), never from `sched.round_end`: that is the engine's own
summary, and `check` compares the two, so a disagreement shows a bug on one side.
"""

from __future__ import annotations

from collections.abc import Callable

from tracer import schema as S
from tracer.batch import assign_sampled_tokens, build_batch
from tracer.event import Event
from tracer.replay_disagg import LEFT_BATCH, disagg_handlers
from tracer.state import (ABORTED, FINISHED, RETRACTED, RUNNING, TREE, UNASSIGNED, WAITING, ReqCopies,
                          ReqState, RoundBatch, RoundState)
from tracer.tree import slot_tokens


class Replayer:
    """The scheduler's state, advanced one event at a time by `apply`."""

    def __init__(self, level: int = 2):
        self.level = level
        self.kv_size: int | None = None
        self.round: int | None = None
        self.waiting, self.running, self.chunked = [], [], None  # queues: list[str], list[str], str | None
        self.reqs: dict[str, ReqState] = {}
        self.slot_owner: dict[int, str] = {}
        self.tree: list[dict] = []
        self.batch: RoundBatch | None = None
        self.event_index, self.time_ns = -1, 0
        self._retracted_front = 0  # retracted requests already put at the queue's front this round
        self._matched: dict[str, list[int]] = {}  # rid -> slots of its prefix match this round
        self._rows: dict[str, dict[int, int | None]] = {}  # rid -> position -> KV slot (its req_to_token row)
        self._tokens: dict[str, dict[int, int]] = {}  # rid -> position -> token id, where the trace says
        self._round_closed = False
        # the last two, by round (overlap: a round ends late)
        self._batches: dict[int | None, RoundBatch] = {}
        self._result_batch: RoundBatch | None = None  # whose tokens the next sched.output_appended are
        self._copies = ReqCopies()  # state()'s copies of the requests, copy-on-write
        self._handlers: dict[str, Callable[[Event], None]] = {
            S.SCHED_CONFIG: self._config, S.TM_TOKENIZED: self._tokenized,
            S.SCHED_REQ_CREATED: self._created, S.SCHED_REFUSED: self._refused,
            S.SCHED_ENQUEUED: self._enqueued, S.SCHED_QUEUE_SORTED: self._queue_sorted,
            S.SCHED_PREFIX_MATCHED: self._prefix_matched, S.SCHED_ADMISSION: self._admission,
            S.SCHED_BATCH_FORMED: self._batch_formed, S.MODEL_FORWARD: self._forward,
            S.SCHED_SAMPLED: self._sampled, S.SCHED_OUTPUT_APPENDED: self._output_appended,
            S.KV_ALLOC: self._kv_alloc, S.KV_ASSIGNED: self._kv_assigned, S.KV_FREE: self._kv_free,
            S.CACHE_INSERTED: self._cache_inserted, S.CACHE_EVICTED: self._kv_free,
            S.CACHE_TREE: self._cache_tree, S.SCHED_SPEC_VERIFIED: self._spec_verified,
            S.SCHED_RETRACTED: self._retracted, S.SCHED_ABORT_REQUESTED: self._abort_requested,
            S.SCHED_FINISHED: self._finished, S.SCHED_ROUND_END: self._round_end, **disagg_handlers(self),
        }

    # ---- driving ----------------------------------------------------------------------------------
    def apply(self, ev: Event) -> None:
        self.event_index, self.time_ns = ev.index, ev.time_ns
        handler = self._handlers.get(ev.name)
        if handler is None:
            return
        main_loop = ev.lane in S.SCHED_LANES and ev.thread is None  # not the forward thread's (overlap loop)
        if self._round_closed and main_loop:  # the first event of a new round
            self._start_round()
        if ev.round is not None and main_loop:
            self.round = ev.round
        handler(ev)
        self._copies.touch(ev.rid, ev.rids, self.batch)  # what a handler may have changed

    def state(self) -> RoundState:
        """A copy of the state now: later events do not change it."""
        return RoundState(
            round=self.round, event_index=self.event_index, time_ns=self.time_ns, waiting=list(self.waiting),
            running=list(self.running), chunked=self.chunked, reqs=self._copies.take(self.reqs),
            slot_owner=dict(self.slot_owner), tree=self.tree, kv_size=self.kv_size,
            batch=self.batch.copy() if self.batch else None)

    def row_of(self, rid: str) -> dict[int, int | None]:
        """The request's req_to_token row as replay knows it now: position -> KV slot (None where a
        duplicate was freed and the tree's copy is read instead). Read it, do not change it."""
        return self._rows.get(rid, {})

    def _start_round(self) -> None:
        """What the scheduler does before anything else in a round: last round's prefill requests whose
        prompt is done join the running batch, after the ones already there (finished ones left out)."""
        last = self.batch
        self._round_closed, self.batch, self._result_batch = False, None, None
        if last is not None and last.mode in ("EXTEND", "MIXED"):
            done = {r for r in (*self.running, *last.rids)  # only these can matter: O(batch), not O(reqs)
                    if r in self.reqs and self.reqs[r].status in LEFT_BATCH}
            joined = [r for r in last.rids if r != self.chunked and r not in done and r not in self.running]
            self.running = [r for r in self.running if r not in done] + joined

    def _req(self, ev: Event) -> ReqState:
        rid = ev.rid or ""
        if rid not in self.reqs:
            self.reqs[rid] = ReqState(rid, created_ns=ev.time_ns)
        return self.reqs[rid]

    def _drop(self, rid: str, *, waiting: bool = True) -> None:
        """Take a request out of the queues; unless only retracted, forget its rows and tokens too."""
        if waiting:
            self._tokens.pop(rid, None)
        if rid in self.running:
            self.running.remove(rid)
        if waiting and rid in self.waiting:
            self.waiting.remove(rid)
        if self.chunked == rid:
            self.chunked = None
        self._rows.pop(rid, None)

    # ---- arrivals and queues ----------------------------------------------------------------------
    def _config(self, ev: Event) -> None:
        self.kv_size = ev.get("kv_size")

    def _created(self, ev: Event) -> None:
        req = self._req(ev)
        req.input_len, req.status = int(ev.get("input_len", 0)), WAITING

    def _tokenized(self, ev: Event) -> None:
        ids = ev.get("input_ids")
        if ev.rid and isinstance(ids, list):
            self._tokens[ev.rid] = dict(enumerate(ids))

    def _refused(self, ev: Event) -> None:
        req = self._req(ev)
        req.status, req.finished_ns = ABORTED, ev.time_ns
        req.finish_reason = {"type": "abort", "message": ev.get("message"), "status_code": 400}
        self._drop(req.rid)

    def _enqueued(self, ev: Event) -> None:
        req = self._req(ev)
        if req.enqueued_ns is None:
            req.enqueued_ns = ev.time_ns
        if req.rid in self.waiting:
            self.waiting.remove(req.rid)
        if ev.get("retracted"):  # retracted requests go to the front, in the order they were retracted
            req.status = RETRACTED
            pos = ev.get("position", self._retracted_front)
            self._retracted_front += 1
        else:
            req.status = WAITING
            pos = ev.get("position", len(self.waiting))
        self.waiting.insert(pos, req.rid)

    def _queue_sorted(self, ev: Event) -> None:
        self.waiting = list(ev.get("waiting", self.waiting))

    def _prefix_matched(self, ev: Event) -> None:
        req = self._req(ev)
        req.prefix_len = int(ev.get("prefix_len", 0))
        self._matched[req.rid] = list(ev.get("matched_slots") or [])

    def _admission(self, ev: Event) -> None:
        decision = ev.get("decision")
        if decision not in ("admitted", "chunked"):
            return
        req = self._req(ev)
        start, end = ev.get("extend_range", [req.prefix_len, req.input_len])
        continuing = self.chunked == req.rid  # the next chunk of a prompt chunked in an earlier round
        if not continuing:
            if req.output_len == 0:  # as the scheduler counts it: the first admission's cached prefix
                req.cached_tokens = start
            self._rows[req.rid] = dict(enumerate(self._matched.get(req.rid, [])))
        if req.admitted_ns is None:
            req.admitted_ns = ev.time_ns
        req.computed_len = max(req.computed_len, min(end, req.input_len) if req.input_len else end)
        req.status = RUNNING
        if req.rid in self.waiting:
            self.waiting.remove(req.rid)
        if decision == "chunked":
            self.chunked = req.rid
        elif continuing:
            self.chunked = None

    # ---- the batch --------------------------------------------------------------------------------
    def _batch_formed(self, ev: Event) -> None:
        rids = list(ev.rids or ev.get("rids") or [])
        decoding = set(ev.get("decoding_rids") or (r for r in rids if r in self.running))
        batch = build_batch(ev, self.chunked, decoding, self._rows, self._tokens, slot_tokens(self.tree))
        self.batch = self._result_batch = batch
        self._batches = {**{k: b for k, b in self._batches.items() if (k or 0) >= (ev.round or 0) - 1},
                         ev.round: batch}
        mode = batch.mode
        if mode in ("DECODE", "TARGET_VERIFY"):  # the running batch runs (retracted and finished ones left)
            self.running = list(batch.rids)
        elif mode == "MIXED":  # the running requests ride along; they rejoin from this batch next round
            self.running = []
        for row in batch.forward_rows:
            self._rows.setdefault(row.rid, {})[row.position] = row.slot
            if row.input_id is not None:
                self._tokens.setdefault(row.rid, {})[row.position] = row.input_id
        for rid in batch.rids:
            req = self.reqs.get(rid)
            if req is None:
                continue
            rounds = (req.decode_rounds if mode in ("DECODE", "TARGET_VERIFY") or rid in decoding
                      else req.prefill_rounds)
            if ev.round is not None and ev.round not in rounds:
                rounds.append(ev.round)

    def _forward(self, ev: Event) -> None:
        batch = self._batches.get(ev.round, self.batch) if ev.thread is not None else self.batch
        if ev.ph != S.PH_END or batch is None:
            return
        if ev.get("duration_ms") is not None:
            batch.duration_ms = float(ev.get("duration_ms"))
        if self.level < 2 and batch.mode != "TARGET_VERIFY":  # no per-token events: one token per sampled
            for row in batch.rows:  # row (TARGET_VERIFY: sched.spec_verified says how many)
                req = self.reqs.get(row.rid)  # (overlap: not a finished request's extra row)
                if row.sampled and req is not None and (ev.thread is None or req.status == RUNNING):
                    req.output_len += 1
                    req.token_ns.append(ev.time_ns)

    def _sampled(self, ev: Event) -> None:
        late = ev.get("batch_round")  # overlap: the round whose batch sampled these
        self._result_batch = self._batches.get(late) if late else self.batch
        if self._result_batch is not None:
            assign_sampled_tokens(self._result_batch, ev)

    def _spec_verified(self, ev: Event) -> None:
        for rid, n in zip(ev.rids or [], ev.get("appended_lens") or []):
            if self.level < 2 and rid in self.reqs:  # level 1 has no sched.output_appended to count
                self.reqs[rid].output_len += n
                self.reqs[rid].token_ns += [ev.time_ns] * n

    def _output_appended(self, ev: Event) -> None:
        req = self._req(ev)
        token = ev.get("token_id")
        req.output_ids.append(token)
        req.output_len = int(ev.get("output_len", len(req.output_ids)))
        req.token_ns.append(ev.time_ns)
        if self._result_batch is not None:
            for row in self._result_batch.rows:
                if row.sampled and row.rid == req.rid and row.token is None:
                    row.token = token

    # ---- KV slots and the radix tree --------------------------------------------------------------
    def _kv_alloc(self, ev: Event) -> None:
        for s in ev.get("slots") or []:
            self.slot_owner[int(s)] = UNASSIGNED

    def _kv_assigned(self, ev: Event) -> None:
        for s in ev.get("slots") or []:
            self.slot_owner[int(s)] = ev.rid or UNASSIGNED

    def _kv_free(self, ev: Event) -> None:  # kv.free and cache.evicted: the slots go back to the free list
        freed = {int(s) for s in ev.get("slots") or []}
        for s in freed:
            self.slot_owner.pop(s, None)
        if ev.get("reason") == "rejected":  # draft rows the model did not accept: those positions are gone
            self._rows = {rid: {p: s for p, s in row.items() if s not in freed}
                          for rid, row in self._rows.items()}
        if ev.get("reason") == "duplicate":  # the request now reads the tree's copy, at a slot we do not know
            for row in self._rows.values():
                for pos, slot in row.items():
                    if slot in freed:
                        row[pos] = None

    def _cache_inserted(self, ev: Event) -> None:
        self.slot_owner.update((int(s), TREE) for s in ev.get("slots") or [])

    def _cache_tree(self, ev: Event) -> None:
        self.tree = list(ev.get("nodes") or [])

    # ---- leaving ----------------------------------------------------------------------------------
    def _retracted(self, ev: Event) -> None:
        self._req(ev).status = RETRACTED
        self._drop(ev.rid or "", waiting=False)

    def _abort_requested(self, ev: Event) -> None:
        if ev.get("where") == "waiting":  # it held nothing: it leaves at once
            self._req(ev).status = ABORTED
            self._drop(ev.rid or "")

    def _finished(self, ev: Event) -> None:
        req = self._req(ev)
        reason = ev.get("finish_reason")
        req.finish_reason = reason if isinstance(reason, dict) else {"type": reason}
        req.status = ABORTED if req.finish_reason.get("type") == "abort" else FINISHED
        req.output_len = int(ev.get("output_len", req.output_len))
        req.cached_tokens = int(ev.get("cached_tokens", req.cached_tokens))
        req.finished_ns = ev.time_ns
        self._drop(req.rid)

    def _round_end(self, ev: Event) -> None:
        if self.kv_size is None and ev.get("free_slots") is not None:
            # no sched.config: the pool size is a constant, so take it once from the engine's own count
            self.kv_size = int(ev.get("free_slots")) + len(self.slot_owner)
        self._matched.clear()
        self._retracted_front, self._round_closed = 0, True
