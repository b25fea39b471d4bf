"""Every trace event's name and fields, in one place, so emitters and readers cannot drift apart.

Replay, check, the diagrams and the TUI name events through these constants; tests/tracer/test_schema.py
holds this module, the engine's emitters and lessons/docs/reference/trace-events.md to agree.
"""

from __future__ import annotations

from dataclasses import dataclass

SCHEMA_VERSION = 2  # 2: the PrefillAdder's budgets and the scheduler's silent decisions (added events only)

LEVEL_REQUESTS, LEVEL_TOKENS, LEVEL_TENSORS = 1, 2, 3
LEVELS = {LEVEL_REQUESTS: "requests and rounds", LEVEL_TOKENS: "adds per-token events and input ids",
          LEVEL_TENSORS: "adds every row's positions and input ids on model.forward"}

# a name's prefix
LANES = ("http", "tm", "dp", "sched", "kv", "cache", "model", "detok", "ipc", "trace", "disagg")
# the lanes of the scheduler process: rounds stamp them
SCHED_LANES = ("sched", "kv", "cache", "model", "disagg")
PROCESSES = ("engine", "tokenizer_manager", "data_parallel_controller", "scheduler", "detokenizer")  # offline
# Engine, then the server's; with --dp-size N the schedulers are scheduler_dp0 … scheduler_dp{N-1}
DP_SCHEDULER_PREFIX = "scheduler_dp"


def proc_role(proc: str) -> str:
    """The part a process plays: a data-parallel rank's scheduler (scheduler_dp1) is a `scheduler`."""
    return "scheduler" if proc.startswith(DP_SCHEDULER_PREFIX) else proc
PH_INSTANT, PH_BEGIN, PH_END = "i", "B", "E"

RECORD_FIELDS = {  # every JSONL record's own fields; an event's facts are under "attrs"
    "v": "schema version", "seq": "per-process sequence number", "ts": "the process's monotonic clock, ns",
    "proc": "the process", "pid": "the OS process id", "name": "the event name", "ph": "i, B or E",
    "rid": "the request", "rids": "the requests", "round": "the scheduler round",
    "thread": "a thread other than the main loop (forward: the overlap scheduler's forward thread)",
    "flow": "{id, dir} pairing an ipc.send with its ipc.recv", "attrs": "the facts of the event",
}

# the PrefillAdder's five counters (sched.prefill_budget `budgets`, sched.admission `before`/`after`)
BUDGETS = ("rem_total_tokens", "rem_input_tokens", "rem_chunk_tokens", "rem_kv_room", "rem_running")


@dataclass(frozen=True)
class Attr:
    """One field under an event's attrs: what it means, the schema version and trace level that write it."""

    meaning: str
    since: int = 1
    level: int = LEVEL_REQUESTS


@dataclass(frozen=True)
class Spec:
    """One event: its attrs, the schema version that added it and the lowest trace level that writes it."""

    name: str
    attrs: dict[str, Attr]
    since: int = 1
    level: int = LEVEL_REQUESTS

    @property
    def lane(self) -> str:
        return self.name.split(".", 1)[0]


EVENTS: dict[str, Spec] = {}


def _event(name: str, attrs: dict[str, str | Attr], since: int = 1, level: int = LEVEL_REQUESTS) -> str:
    """Declare an event and return its name: each constant below sits next to its fields."""
    if name in EVENTS or name.split(".", 1)[0] not in LANES:
        raise ValueError(f"{name}: declared twice, or not in a known lane")
    fields = {k: a if isinstance(a, Attr) else Attr(a, since, level) for k, a in attrs.items()}
    EVENTS[name] = Spec(name, fields, since, level)
    return name


def v2(meaning: str) -> Attr:
    return Attr(meaning, since=2)


def tokens(meaning: str) -> Attr:
    return Attr(meaning, level=LEVEL_TOKENS)


def tensors(meaning: str) -> Attr:
    return Attr(meaning, level=LEVEL_TENSORS)


# ---- trace and ipc: any process -------------------------------------------------------------------
TRACE_PROCESS_START = _event("trace.process_start", {
    "wall_ns": "wall clock at the run's shared anchor instant", "mono_ns": "monotonic clock at that instant",
    "schema": "the schema version", "level": "the trace level"})
IPC_SEND = _event("ipc.send", {
    "msg": "message type", "dst": "receiving process",
    "output_ids": "on BatchTokenIDOutput: the new tokens of each rid"})
IPC_RECV = _event("ipc.recv", {"msg": "message type", "src": "sending process"})

# ---- http and tm: the HTTP server and the TokenizerManager ----------------------------------------
HTTP_REQUEST_RECEIVED = _event("http.request_received", {
    "endpoint": "the URL path", "stream": "SSE or one response", "type": "the request class",
    "sampling_params": "as the client sent them",
    "request_id": v2("the x-request-id (else x-correlation-id) header: the id SGLang's router logs; "
                     "only when sent"),
    "tokenizer_worker": v2("with --tokenizer-worker-num N > 1: which worker process (0 … N-1) took it")})
TM_GENERATE_REQ_INPUT = _event("tm.generate_req_input", {"type": "GenerateReqInput"})
TM_TOKENIZED = _event("tm.tokenized", {
    "type": "TokenizedGenerateReqInput", "text": "the prompt after the chat template", "input_ids": "its ids",
    "input_texts": tokens("each input id decoded alone")})
TM_WAITER_WOKEN = _event("tm.waiter_woken", {"delta_text": "the new text", "finished": "the request is done"})
HTTP_SSE_CHUNK = _event("http.sse_chunk", {
    "type": "SSE chunk", "index": "chunk number", "delta": "its text", "bytes": "its size on the wire"},
    level=LEVEL_TOKENS)
HTTP_RESPONSE_FINISHED = _event("http.response_finished", {
    "finish_reason": "why it ended", "usage": "token counts", "status": "HTTP status"})
HTTP_ERROR = _event("http.error", {"status": "HTTP status", "message": "what went wrong"})
TM_SHUTDOWN = _event("tm.shutdown", {
    "signal": "SIGTERM or SIGINT", "grace_s": "how long running requests may still take"}, since=2)
TM_SHUTDOWN_ABORTED = _event("tm.shutdown_aborted", {"grace_s": "the grace period it outlasted"}, since=2)

# ---- dp: the DataParallelController (--dp-size > 1) ---------------------------------------------
DP_DISPATCH = _event("dp.dispatch", {
    "method": "the --load-balance-method",
    "loads": "each rank's running + waiting requests, as the controller saw them",
    "dp_rank": "the chosen rank", "routed": "the client chose it (routed_dp_rank or X-Data-Parallel-Rank)"},
    since=2)

# ---- sched: the Scheduler -------------------------------------------------------------------------
SCHED_CONFIG = _event("sched.config", {
    "kv_size": "usable KV slots", "max_running_requests": "server arg", "max_prefill_tokens": "server arg",
    "chunked_prefill_size": "server arg (null: no chunking)", "schedule_policy": "fcfs, lpm, ...",
    "disable_radix_cache": "server arg", "enable_mixed_chunk": "server arg",
    "overlap_schedule": v2("true when the overlap loop runs (absent otherwise): results processed one round "
                           "late"),
    "dequant_gemm_rows": v2("with GGUF blocks kept (bfloat16): per product (qkv_proj ... lm_head), the rows "
                            "from which its blocks are dequantized for oneDNN's GEMM (null: never)")})
SCHED_REQ_CREATED = _event("sched.req_created", {
    "type": "Req", "input_len": "prompt tokens", "sampling_params": "as the scheduler runs them",
    "max_new_tokens_clamped": v2("{from, to}: max_new_tokens cut to fit the context or the KV pool")})
SCHED_REFUSED = _event("sched.refused", {"message": "why the request never ran"})
SCHED_GRAMMAR_QUEUED = _event("sched.grammar_queued", {
    "kind": "json_schema, regex or ebnf: compiling on the grammar thread; enqueued next round"},
    since=2)
SCHED_GRAMMAR_READY = _event("sched.grammar_ready", {
    "kind": "json_schema, regex or ebnf", "cached": "compiled for an earlier request: enqueued at once"},
    since=2)
SCHED_GRAMMAR_MASKED = _event("sched.grammar_masked", {
    "allowed": "per rid, how many tokens its grammar lets the sampler pick (the rest masked to -inf)"},
    since=2)
SCHED_ENQUEUED = _event("sched.enqueued", {
    "queue_len": "waiting queue length after", "retracted": "a retracted request, put at the front",
    "position": "optional index in the queue after the insert (no emitter writes it yet)"})
SCHED_BATCH_MERGED = _event("sched.batch_merged", {
    "joined": "last batch's rids joining running_batch", "finished": "rids dropped because they finished",
    "chunked_excluded": "the request still being chunked, or null", "running": "running_batch after"},
    since=2)
SCHED_QUEUE_SORTED = _event("sched.queue_sorted", {"waiting": "rids in the lpm policy's new order"})
SCHED_PREFIX_MATCHED = _event("sched.prefix_matched", {
    "prefix_len": "tokens found in the radix cache", "matched_slots": "their KV slots"})
SCHED_PREFILL_SKIPPED = _event("sched.prefill_skipped", {
    "reason": "max_running_requests", "num_running": "running requests",
    "max_running_requests": "the limit", "waiting": "rids left waiting"}, since=2)
SCHED_PREFILL_BUDGET = _event("sched.prefill_budget", {
    "available_size": "free KV slots", "evictable_size": "KV slots the tree could evict",
    "new_token_ratio": "share of future tokens reserved", "running_rids": "the running requests",
    "running_future_tokens": "what each may still produce", "reserved_tokens": "their sum x new_token_ratio",
    "mixed_decode_rows": "decode rows a MIXED batch takes", "budgets": "the five BUDGETS at the start"},
    since=2)
SCHED_ADMISSION = _event("sched.admission", {
    "decision": "admitted, chunked or refused", "extend_range": "[start, end) when admitted or chunked",
    "budget": "the budget that refused (v2: or cut the chunk)", "need": "when refused on kv_cache",
    "source": v2("chunked_req or waiting_queue"), "before": v2("the budgets before"),
    "after": v2("the budgets after"), "extend_input_len": v2("prompt tokens not yet cached"),
    "future_tokens": v2("tokens it may still produce"),
    "prefix_locked": v2("cached prefix slots its lock made unevictable")})
SCHED_ADMISSION_STOPPED = _event("sched.admission_stopped", {
    "not_considered": "waiting rids the adder never looked at", "stopped_by": "the candidate that ended it",
    "decision": "its decision", "budget": "its budget"}, since=2)
SCHED_DECODE_MEM_CHECKED = _event("sched.decode_mem_checked", {
    "where": "decode or mixed", "running": "rids after filter_batch", "finished": "rids filter_batch dropped",
    "needed": "one KV slot per running request", "available_size": "free KV slots",
    "evictable_size": "KV slots the tree could evict", "ok": "needed <= available + evictable"}, since=2)
SCHED_BATCH_FORMED = _event("sched.batch_formed", {
    "type": "ScheduleBatch", "forward_mode": "EXTEND, DECODE, MIXED or TARGET_VERIFY", "seq_lens": "per rid",
    "prefix_lens": "per rid", "extend_lens": "per rid", "out_cache_loc": "each row's KV slot",
    "req_pool_indices": "per rid", "decoding_rids": "in MIXED: the 1-token decode rows' rids",
    "input_ids": tokens("each row's input id"), "logit_rows": v2("per rid: the index of its sampled row"),
    "draft_lens": v2("in TARGET_VERIFY: per rid, its draft tokens (rows after its first)")})
SCHED_SAMPLED = _event("sched.sampled", {
    "type": "GenerationBatchResult", "token_ids": "one per rid", "texts": "each token decoded",
    "logprobs": "each token's log-probability",
    "batch_round": v2("overlap loop only: the round whose batch sampled them (processed one round late)"),
    "rows": Attr("in TARGET_VERIFY: per rid, its rows (token_ids has one per row)", since=2,
                 level=LEVEL_TOKENS)},
    level=LEVEL_TOKENS)
SCHED_OUTPUT_APPENDED = _event("sched.output_appended", {
    "token_id": "the kept token", "output_len": "output tokens after", "finished": "the request is done",
    "finish_reason": "why, or null"}, level=LEVEL_TOKENS)
SCHED_SPEC_VERIFIED = _event("sched.spec_verified", {
    "draft_lens": "per rid: draft tokens proposed", "verified_rows": "per rid: rows verified (1 + drafts)",
    "accepted_lens": "per rid: drafts equal to the model's own token",
    "appended_lens": "per rid: tokens appended (accepted + 1, fewer if it finished)"}, since=2)
SCHED_RETRACTED = _event("sched.retracted", {"output_len": "output tokens so far"})
SCHED_ABORT_REQUESTED = _event("sched.abort_requested", {"where": "waiting or running"})
SCHED_FINISHED = _event("sched.finished", {
    "finish_reason": "{type, ...}; type abort for aborts", "output_len": "output tokens",
    "cached_tokens": "prompt tokens served from the cache"})
SCHED_ROUND_END = _event("sched.round_end", {
    "waiting": "rids", "running": "running_batch's rids", "chunked": "rid or null", "free_slots": "KV slots",
    "cached_slots": "slots in the tree", "evictable_slots": "tree slots no request locks"})

# ---- kv and cache: the KV pool and the radix tree -------------------------------------------------
KV_ALLOC = _event("kv.alloc", {"slots": "allocated, no owner yet"})
KV_ASSIGNED = _event("kv.assigned", {"slots": "the rows of this rid written this round"})
KV_FREE = _event("kv.free", {"slots": "back on the free list",
                             "reason": "duplicate, finished, evicted, flush, retracted, rejected, "
                                       "transferred, timeout or aborted"})
CACHE_INSERTED = _event("cache.inserted", {"slots": "now owned by the radix tree"})
CACHE_EVICTED = _event("cache.evicted", {"slots": "every slot one eviction freed"})
CACHE_TREE = _event("cache.tree", {"nodes": "the whole tree: [{id, parent, key, value, lock_ref, "
                                             "last_access_time}] (the LRU stamp: the radix cache's only)"})

# ---- disagg: prefill/decode disaggregation (--disaggregation-mode prefill|decode) -----------------
DISAGG_QUEUED = _event("disagg.queued", {
    "queue": "bootstrap, inflight (prefill) or prealloc, transfer (decode)", "room": "the bootstrap room"},
    since=2)
DISAGG_BOOTSTRAP = _event("disagg.bootstrap", {
    "room": "the bootstrap room", "mode": "prefill: the decode half registered; decode: it registered",
    "peer": "the other server's endpoint", "num_slots": "KV slots the decode half preallocated"}, since=2)
DISAGG_KV_SENT = _event("disagg.kv_sent", {
    "room": "the bootstrap room", "dst": "the decode server's KV endpoint",
    "num_tokens": "prompt KV rows sent", "slots": "the prefill's KV slots they came from",
    "nbytes": "K and V bytes, every layer", "first_token": "the token the prefill sampled"}, since=2)
DISAGG_KV_RECEIVED = _event("disagg.kv_received", {
    "room": "the bootstrap room", "num_tokens": "prompt KV rows received",
    "slots": "the preallocated slots they were written to", "nbytes": "K and V bytes, every layer",
    "first_token": "the prefill's first token"}, since=2)
DISAGG_TRANSFER_DONE = _event("disagg.transfer_done", {"room": "the bootstrap room (the decode half acked)"},
                              since=2)
DISAGG_TIMEOUT = _event("disagg.timeout", {
    "queue": "bootstrap, inflight (prefill) or transfer (decode): where it waited for a peer that never "
             "answered; it finishes as abort, status 503", "room": "the bootstrap room"}, since=2)

# ---- model: the ModelRunner -----------------------------------------------------------------------
MODEL_FORWARD = _event("model.forward", {
    "type": "ForwardBatch", "forward_mode": "EXTEND, DECODE, MIXED or TARGET_VERIFY",
    "num_rows": "rows in the batch",
    "positions": tensors("each row's position"), "input_ids": tensors("each row's input id"),
    "out_cache_loc": tensors("each row's KV slot"), "duration_ms": "on E: the forward's time",
    "tp_size": "on E, with --tp-size > 1: the ranks", "all_reduce": "on E, tp: all-reduces in this forward",
    "all_gather": "on E, tp: all-gathers in this forward", "comm_ms": "on E, tp: time in those collectives"})

# ---- detok: the Detokenizer -----------------------------------------------------------------------
DETOK_DECODED = _event("detok.decoded", {
    "type": "BatchStrOutput", "token_ids": "the new tokens", "delta": "the new text",
    "read_offset": "incremental decoding offset", "surr_offset": "surrogate offset",
    "held_back_tokens": "tokens held back (an incomplete character)",
    "stop_prefix": "text held back (a possible stop string)", "stop_trimmed": "a stop string was cut"},
    level=LEVEL_TOKENS)
