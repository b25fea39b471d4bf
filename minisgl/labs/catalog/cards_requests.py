"""The cards of the labs on a request's way in: the front end, the loop, the cache, admission and the
batch's rows (lessons 3-7). The table of all labs is cards.py."""

from __future__ import annotations

from minisgl.labs.lab import Lab

TM_WAIT_LOOP = Lab(
    name="tm_wait_loop",
    title="The TokenizerManager's waiter and receive loop: handle_loop and _wait_one_response",
    component="tm_wait_loop",
    file="tm_wait_loop.py",
    lesson="tokenizer-manager",
    scenario="one_request",
    boundaries=("tm_outputs", "tm_disconnect", "tm_refused"),
    order=3,
    sglang="python/sglang/srt/managers/tokenizer_manager.py: TokenizerManager._wait_one_response, "
           "handle_loop (and _handle_batch_output)",
    hints=(
        ("Start with handle_loop: `while True: msg = await self.recv_from_detokenizer.recv()`, then dispatch "
         "on isinstance. The filing and the waking are already written: _handle_batch_output does both."),
        ("handle_loop must outlive any one message: put the dispatch (not the recv) in try/except Exception "
         "and log with logger.exception. CancelledError is not an Exception, so shutdown still stops the "
         "task."),
        ("_wait_one_response: wrap the wait in asyncio.wait_for(state.event.wait(), "
         "timeout=DISCONNECT_POLL_S); on asyncio.TimeoutError check the client (request may be None) and "
         "`continue`. Forgetting state.event.clear() makes the next wait return at once, with no new piece "
         "to take."),
        ("After a wake: raise state.error if set; `pieces, state.out_list = state.out_list, []`; clear the "
         "event; `if not (state.finished or obj.stream): continue`. The delta is the pieces' deltas joined "
         "(several may have arrived in one wake), not state.text."),
        ("Then `meta = pieces[-1]['meta_info']`; `error = refusal(meta)`, raise it if not None; yield "
         "{'text': state.text, 'delta': ..., 'output_ids': list(state.output_ids), 'meta_info': meta}; and "
         "`if state.finished: return`."),
    ),
)


GET_NEXT_BATCH_TO_RUN = Lab(
    name="get_next_batch_to_run",
    title="The scheduler's choice: merge last round's prefill, prefill first, else decode",
    component="get_next_batch_to_run",
    file="get_next_batch_to_run.py",
    lesson="scheduler-loop",
    scenario="mixed_round",
    boundaries=("batch_merge",),
    order=4,
    sglang="python/sglang/srt/managers/scheduler.py: Scheduler.get_next_batch_to_run",
    hints=(
        "Three steps, in this order: merge last_batch into running_batch (only if it was a prefill batch), "
        "try self.get_new_batch_prefill(), and only if that gives None, decode running_batch. A prefill "
        "batch is never put into running_batch in the round it is formed.",
        "'Was a prefill batch' is last_batch.forward_mode.is_extend(), which is true for EXTEND and MIXED. "
        "Comparing with ForwardMode.EXTEND loses the requests that rode in a MIXED batch: they left "
        "running_batch for that round and only come back through this merge.",
        "The merge: dropped = self.last_batch.filter_batch(chunked_req_to_exclude=self.chunked_req); "
        "dropped += self.running_batch.filter_batch(); then merge_batch, then "
        "self.trace_collector.batch_merged(dropped).",
        "The decode branch: if batch is None and not self.running_batch.is_empty(): self.running_batch = "
        "self.update_running_batch(self.running_batch); run it unless it came back empty (return None then). "
        "Return the running_batch object itself, not a copy: the next round's last_batch is that object.",
    ),
)


RADIX_CACHE = Lab(
    name="radix_cache",
    title="The radix tree: match_prefix, insert, lock counts and eviction",
    component="radix_cache",
    file="radix_cache.py",
    lesson="radix-cache",
    scenario="radix_cache",
    boundaries=("radix_boundaries",),
    view="radix",
    order=5,
    sglang="python/sglang/srt/mem_cache/radix_cache.py: RadixCache.match_prefix, insert, _split_node, "
           "inc_lock_ref, dec_lock_ref, evict",
    hints=(
        "Start with _split_node and match_prefix: the tests for a hit, a miss and a partial match need only "
        "those. A partial match must split, so the tree never returns half a node's slots.",
        "insert walks exactly like match_prefix, but adds a leaf for the tokens that are left. Only the new "
        "leaf's tokens become evictable; what was already there keeps its lock state.",
        "Lock counts: walk from the node up to the root (not including it). Only the 0 -> 1 and 1 -> 0 "
        "changes move a node's tokens between evictable and protected; return the change in evictable size.",
        "evict: heapify the unlocked leaves (TreeNode sorts by last_access_time, then id), pop until enough "
        "slots came out, and push a parent that just became an unlocked childless node. The trace compares "
        "node ids, so create nodes only with self._new_node and tick the clock once per match_prefix/insert.",
    ),
)


ADD_ONE_REQ = Lab(
    name="add_one_req",
    title="Admission: PrefillAdder.add_one_req spends the round's budgets on one waiting request",
    component="add_one_req",
    file="add_one_req.py",
    lesson="admission",
    scenario="admission_budgets",
    boundaries=("admission_boundaries",),
    view="admission",
    order=6,
    sglang="python/sglang/srt/managers/schedule_policy.py: PrefillAdder.add_one_req (and the budgets it "
           "spends: rem_total_tokens, rem_input_tokens, rem_chunk_tokens)",
    hints=(
        "Open the record first (rec = self._look_at(req, \"waiting_queue\")) and make every return go "
        "through self._refuse or self._admit: they write what the trace shows. Refusals spend nothing. The "
        "order is rem_running, rem_input_tokens, rem_chunk_tokens, then the KV room; the first one that says "
        "no wins.",
        "The rows check refuses only a candidate BEHIND an admitted one (self.can_run_list is not empty) "
        "whose extend_input_len is larger than rem_input_tokens, or any candidate when rem_input_tokens <= "
        "0. rem_chunk_tokens is None when chunking is off: test `is not None` before comparing it.",
        "KV room: need = req.extend_input_len + rec.future_tokens. Refuse (rec.need = need, budget "
        "\"kv_cache\", NO_TOKEN) when need > rem_total_tokens and the engine is not idle, or when "
        "rem_kv_room < 1. Idle means self.nothing_running and nothing in self.can_run_list yet.",
        "Locking: self._spend_lock(rec, -self.tree_cache.inc_lock_ref(req.last_node)) right after the KV "
        "check. The whole prompt fits when extend_input_len <= rem_kv_room and (chunking off, or "
        "extend_input_len <= self._chunk_limit()): then subtract rec.future_tokens from rem_total_tokens "
        "BEFORE self._admit(rec, req, len(req.fill_ids), chunked=False), because _admit records the budgets "
        "after.",
        "Not whole: take = min(self._chunk_limit(), self.rem_kv_room) if chunking is on, else 0. take <= 0: "
        "self._spend_lock(rec, -self.tree_cache.dec_lock_ref(req.last_node)), rec.need = need, refuse by "
        "kv_cache. Otherwise self._admit(rec, req, len(req.prefix_indices) + take, chunked=True, "
        "budget=self._chunk_budget()), self.new_chunked_req = req, return AddReqResult.OTHER.",
    ),
)


PREPARE_FOR_EXTEND = Lab(
    name="prepare_for_extend",
    title="The round's plan: prefix_lens, extend_lens, seq_lens, out_cache_loc and req_to_token",
    component="prepare_for_extend",
    file="prepare_for_extend.py",
    lesson="batch-rows",
    scenario="shared_prefix",
    order=7,
    sglang="python/sglang/srt/managers/schedule_batch.py: ScheduleBatch.prepare_for_extend",
    hints=(
        "Everything a request needs is already on it: len(req.prefix_indices) is its prefix_len, "
        "req.extend_input_len its extend_len, and req.fill_ids the tokens whose KV exists once this round "
        "runs. seq_len is prefix_len + extend_len.",
        "The rows of the batch are the tokens after each request's prefix, request after request: input_ids "
        "is fill_ids[prefix_len:] of the first request, then of the second, and so on. A resumed request's "
        "fill_ids hold its output tokens too, so do not read origin_input_ids.",
        "Take the round's KV slots with ONE call, self.alloc_token_slots(sum of extend_lens): it evicts from "
        "the radix cache when the free list is short, and the trace records one kv.alloc per call. Only a "
        "request whose req_pool_idx is None takes a request slot (one req_to_token_pool.alloc(1) each, in "
        "batch order); a chunked prompt keeps the one it has.",
        "Then write each request's row of req_to_token: columns [0, prefix_len) get req.prefix_indices (the "
        "cached slots the attention will read), columns [prefix_len, seq_len) get that request's piece of "
        "out_cache_loc. Walk the requests with a running offset into out_cache_loc.",
    ),
)
