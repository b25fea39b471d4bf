"""Admission: in which order waiting requests are considered, and which of them fit this round.

PrefillAdder holds this round's budgets and spends them one request at a time:
- rem_input_tokens: prefill rows per round (--max-prefill-tokens)
- rem_chunk_tokens: rows a single prompt may take this round (--chunked-prefill-size)
- rem_total_tokens: free + evictable KV slots, minus what running requests will still need
- max running requests (--max-running-requests)
"""

from __future__ import annotations

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


class PrefillAdder:
    def __init__(self, tree_cache, token_to_kv_pool, running_reqs: list[Req], new_token_ratio: float,
                 max_prefill_tokens: int, chunked_prefill_size: int | None, max_running_requests: int,
                 mixed_decode_rows: int = 0, has_chunked_req: bool = False):
        self.tree_cache = tree_cache
        self.rem_input_tokens = max_prefill_tokens - mixed_decode_rows
        self.rem_chunk_tokens = chunked_prefill_size
        self.rem_total_tokens = (
            token_to_kv_pool.available_size()
            + tree_cache.evictable_size()
            - sum(_future_tokens(r) * new_token_ratio for r in running_reqs)
        )
        self.rem_kv_room = token_to_kv_pool.available_size() + tree_cache.evictable_size()  # hard limit
        self.rem_running = max_running_requests - len(running_reqs)
        self.nothing_running = not running_reqs and not has_chunked_req
        self.can_run_list: list[Req] = []
        self.new_chunked_req: Req | None = None
        self.log: list[tuple[str, str, dict]] = []  # (rid, decision, facts): one line per candidate

    def add_chunked_req(self, req: Req) -> Req | None:
        """Continue a prompt that an earlier round chunked. Returns it if it is still unfinished."""
        limit = min(self._chunk_limit(), self.rem_kv_room)
        if limit <= 0:
            self.log.append((req.rid, "refused", {"budget": "kv_cache"}))
            return req
        full_len = len(req.fill_ids)
        end = len(req.prefix_indices) + min(req.extend_input_len, limit)
        self._admit(req, end, chunked=end < full_len)
        return req if end < full_len else None

    def add_one_req(self, req: Req) -> AddReqResult:
        if self.rem_running <= 0:
            return self._refuse(req, "max_running_requests", AddReqResult.OTHER)
        if self.rem_input_tokens <= 0 or (self.can_run_list and req.extend_input_len > self.rem_input_tokens):
            return self._refuse(req, "max_prefill_tokens", AddReqResult.OTHER)
        if self.rem_chunk_tokens is not None and self.rem_chunk_tokens <= 0:
            return self._refuse(req, "chunked_prefill_size", AddReqResult.OTHER)
        need = req.extend_input_len + _future_tokens(req)
        # the first request of an idle engine always fits (its max_new_tokens was clamped to the pool)
        idle = self.nothing_running and not self.can_run_list
        if (need > self.rem_total_tokens and not idle) or self.rem_kv_room < 1:
            return self._refuse(req, "kv_cache", AddReqResult.NO_TOKEN, need=need)

        # a locked prefix is no longer evictable: both room counters shrink by it
        delta = self.tree_cache.inc_lock_ref(req.last_node)
        self.rem_total_tokens += delta
        self.rem_kv_room += delta
        chunking = self.rem_chunk_tokens is not None
        if req.extend_input_len <= self.rem_kv_room and (not chunking or req.extend_input_len <= self._chunk_limit()):
            self._admit(req, len(req.fill_ids), chunked=False)
            self.rem_total_tokens -= _future_tokens(req)
            return AddReqResult.CONTINUE
        take = min(self._chunk_limit(), self.rem_kv_room) if chunking else 0
        if take <= 0:  # no chunking, or no room at all: it waits
            self.tree_cache.dec_lock_ref(req.last_node)
            return self._refuse(req, "kv_cache", AddReqResult.NO_TOKEN, need=need)
        # too long for this round: take a chunk now, the rest in later rounds
        self._admit(req, len(req.prefix_indices) + take, chunked=True)
        self.new_chunked_req = req
        return AddReqResult.OTHER

    def _chunk_limit(self) -> int:
        """Rows one prompt may take this round when chunking is on."""
        return max(1, min(self.rem_input_tokens, self.rem_chunk_tokens))

    def _admit(self, req: Req, end: int, chunked: bool) -> None:
        start = len(req.prefix_indices)
        req.set_extend_range(start, end)
        self.can_run_list.append(req)
        self.rem_running -= 1
        self.rem_kv_room -= req.extend_input_len
        self.rem_input_tokens -= req.extend_input_len
        self.rem_total_tokens -= req.extend_input_len
        if self.rem_chunk_tokens is not None:
            self.rem_chunk_tokens -= req.extend_input_len
        self.log.append((req.rid, "chunked" if chunked else "admitted", {"extend_range": [start, end]}))

    def _refuse(self, req: Req, budget: str, result: AddReqResult, **facts) -> AddReqResult:
        self.log.append((req.rid, "refused", {"budget": budget, **facts}))
        return result


def _future_tokens(req: Req) -> int:
    return min(req.sampling_params.max_new_tokens - len(req.output_ids), CLIP_MAX_NEW_TOKENS)
