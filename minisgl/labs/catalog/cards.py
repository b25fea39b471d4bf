"""Every lab's card, in the order of the course: what the learner builds, where it runs, how it is checked
and the hints. The rest of a lab is its folder here (catalog/<name>/): starter.py, test_lab.py, README.md,
and what grades it besides the trace (bugs.py, differential.py, equivalent.py, mutants.json)."""

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

ADD_CHUNKED_REQ = Lab(
    name="add_chunked_req",
    title="Chunked prefill: PrefillAdder.add_chunked_req gives a long prompt its next chunk",
    component="add_chunked_req",
    file="add_chunked_req.py",
    lesson="chunked-retract-mixed",
    scenario="chunked_prefill",
    boundaries=("admission_boundaries",),
    view="admission",
    order=9,
    sglang="python/sglang/srt/managers/schedule_policy.py: PrefillAdder.add_chunked_req (the scheduler keeps "
           "the request in Scheduler.chunked_req: python/sglang/srt/managers/scheduler.py, "
           "get_new_batch_prefill)",
    hints=(
        "Open the record first (rec = self._look_at(req, \"chunked_req\")) and make every outcome go through "
        "self._refuse or self._admit: they write the sched.admission event the trace compares.",
        "The rows this chunk may take: limit = min(self._chunk_limit(), self.rem_kv_room). If limit <= 0, "
        "refuse by \"kv_cache\" with AddReqResult.NO_TOKEN and return req (not None: it is still "
        "unfinished).",
        "The extend range starts at len(req.prefix_indices), the tokens already computed, and its end is an "
        "absolute position in fill_ids: len(req.prefix_indices) + min(req.extend_input_len, limit).",
        "chunked = end < len(req.fill_ids) (read the length before _admit cuts fill_ids). Then "
        "self._admit(rec, req, end, chunked, budget=self._chunk_budget() if chunked else None) and return "
        "req if chunked else None. Reserve nothing for future tokens.",
    ),
)

DECODE_AND_RETRACT = Lab(
    name="decode_and_retract",
    title="The decode round and retraction: prepare_for_decode and retract_decode",
    component="decode_and_retract",
    file="decode_and_retract.py",
    lesson="chunked-retract-mixed",
    scenario="retract",
    boundaries=("retract_ties",),
    order=9,
    sglang="python/sglang/srt/managers/schedule_batch.py: ScheduleBatch.prepare_for_decode, "
           "ScheduleBatch.retract_decode",
    hints=(
        "prepare_for_decode: a running request feeds back the token it sampled last round, "
        "req.output_ids[-1]. Its seq_len is req.seqlen (prompt + outputs, that token included), and that "
        "token's KV goes to position seq_len - 1 of its req_to_token row.",
        "prepare_for_decode: a DECODE batch has no prefix or extend lengths: leave prefix_lens and "
        "extend_lens empty (the trace records them). Take the round's slots with ONE "
        "self.alloc_token_slots(len(self.reqs)), so the radix cache is evicted when the free list is short.",
        "retract_decode: sort once, before the loop, with the key (len(r.output_ids), "
        "-len(r.origin_input_ids), r.rid), and take victims from the front while not "
        "self.check_decode_mem(). If only one request is left and there is still no room, raise "
        "KVCacheExhausted.",
        "retract_decode, per victim: remove it from self.reqs, then "
        "self.cache_manager.cache_finished_req(victim, free_reason=\"retracted\") (its KV goes to the radix "
        "tree, or back to the pool without one), then victim.reset_for_retract(), and append it to the "
        "returned list. The order matters: cache_finished_req reads the request slot that reset clears.",
    ),
)

DECODE_INCREMENTAL = Lab(
    name="decode_incremental",
    title="Incremental detokenization: read and surround offsets, held-back bytes, stop strings",
    component="decode_incremental",
    file="decode_incremental.py",
    lesson="detokenizer",
    scenario="stream_detok",
    order=10,
    sglang="python/sglang/srt/managers/detokenizer_manager.py: DetokenizerManager.handle_batch_token_id_out "
           "(DecodeStatus with decode_ids, surr_offset, read_offset; trim_matched_stop)",
    hints=(
        "Start with take_complete_text and decode_incremental without stop strings: the tests on offsets and "
        "on half a character need only those. The new text is decode(ids[surr:]) minus its first "
        "len(decode(ids[surr:read])) characters.",
        "When the new text ends in U+FFFD (or adds nothing) and the request is not finished, return \"\" and "
        "move NO offset: the held-back count is len(decode_ids) - read_offset, and the trace records it. "
        "When you do move, it is surr_offset = read_offset first, then read_offset = len(decode_ids).",
        "apply_stop_strings: held_from = len(text) - (0 if finished else stop_prefix_len(text, stops)); "
        "cut = find_stop(text, stops). If 0 <= cut <= held_from: (text[:cut], \"\", True); else "
        "(text[:held_from], text[held_from:], False).",
        "decode_incremental: extend decode_ids first, return the empty step if status.stopped; then "
        "new = take_complete_text(...); delta, status.stop_pending, trimmed = apply_stop_strings("
        "status.stop_pending + new, [s for s in stop_strs if s], finished=finished); status.stopped = "
        "trimmed; status.decoded_text += delta; HeldBack(len(status.decode_ids) - status.read_offset, "
        "status.stop_pending).",
    ),
)

FUTURE_MAP = Lab(
    name="future_map",
    title="The overlap loop's FutureMap: placeholders for tokens not sampled yet",
    component="future_map",
    file="future_map.py",
    lesson="overlap",
    scenario="overlap_schedule",
    boundaries=("overlap_ring",),
    order=13,
    sglang="python/sglang/srt/managers/overlap_utils.py: FutureMap (alloc_future_indices, "
           "resolve_future, store_to_future_map)",
    hints=(
        "__init__: self.size = 3 * max_running_requests + 1, self.future_ct = 0, and self.token_ids_buf = "
        "torch.zeros(self.size + 1, dtype=torch.int64): indices run 1 .. size, index 0 is never handed out.",
        "alloc_future_indices: remember start = self.future_ct, advance self.future_ct = (self.future_ct + "
        "bs) % self.size, and return [(start + i) % self.size + 1 for i in range(bs)]. The trace's "
        "sched.batch_formed shows every placeholder you hand out as a negative input id.",
        "resolve_future_token_ids: torch.where(input_ids < 0, self.token_ids_buf[torch.clamp(-input_ids, "
        "min=0)], input_ids). A placeholder resolved to the wrong token changes what the model samples next "
        "(sched.sampled).",
        "store_to_future_map: self.token_ids_buf[future_indices] = torch.tensor(next_token_ids, "
        "dtype=torch.int64).",
    ),
)

SPEC_VERIFY = Lab(
    name="spec_verify",
    title="Speculative verification: accept_lengths and NGRAMWorker.verify keep the right drafts",
    component="spec_verify",
    file="spec_verify.py",
    lesson="overlap",
    scenario="ngram_speculative",
    boundaries=("spec_boundaries",),
    order=13,
    sglang="python/sglang/srt/speculative/ngram_worker.py: NGRAMWorker.forward_batch_generation (its verify "
           "step), and the accept lengths its verify kernel computes",
    hints=(
        "accept_lengths: walk the requests with a running row index `start`. A request's rows are its last "
        "token's and one per draft, so after it `start` grows by 1 + len(draft). Draft n is right when it "
        "equals next_token_ids[start + n]; count from n = 0 and stop at the first wrong one.",
        "verify, step 1: result.draft_lens = [len(d) for d in batch.spec_info.draft_tokens] and "
        "result.accept_lens = accept_lengths(those drafts, result.next_token_ids). Everything after reads "
        "result.rows_of(i): request i takes tokens from rows.start .. rows.stop - 1 (accepted + 1 rows).",
        "verify, step 2: the rejected rows of request i are out_cache_loc[rows.stop : rows.start + 1 + "
        "len(draft)] (the bonus token's row, rows.stop - 1, is kept). One free_rejected_draft_slots call per "
        "request, in batch order: the trace shows each as a kv.free with reason rejected.",
        "verify, the limit: only `if draft and self.adaptive`, set req.spec_draft_limit = "
        "self.next_draft_limit(req.spec_draft_limit, len(draft), accepted) with the drafts accepted (not "
        "the tokens gained). The next round's sched.batch_formed shows each request's draft_lens: a wrong "
        "limit shows there first.",
        "verify, the end: self.stats.verify_rounds += 1, proposed += the drafts, accepted += the accepted "
        "drafts; then batch.forward_mode, batch.spec_info = ForwardMode.DECODE, None.",
    ),
)

LABS: tuple[Lab, ...] = (TM_WAIT_LOOP, GET_NEXT_BATCH_TO_RUN, RADIX_CACHE, ADD_ONE_REQ, PREPARE_FOR_EXTEND,
                         ADD_CHUNKED_REQ, DECODE_AND_RETRACT, DECODE_INCREMENTAL, FUTURE_MAP,
                         SPEC_VERIFY)
