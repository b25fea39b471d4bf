"""The cards of the labs on the rounds after admission: chunks, decode and retraction, the detokenizer, the
overlap loop and speculative decoding (lessons 9-13). The table of all labs is cards.py."""

from __future__ import annotations

from minisgl.labs.lab import Lab

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


MIX_WITH_RUNNING = Lab(
    name="mix_with_running",
    title="The mixed round: ScheduleBatch.mix_with_running puts decode rows into a prefill",
    component="mix_with_running",
    file="mix_with_running.py",
    lesson="chunked-retract-mixed",
    scenario="mixed_round",
    boundaries=("mixed_boundaries",),
    order=9,
    sglang="python/sglang/srt/managers/schedule_batch.py: ScheduleBatch.mix_with_running (called from "
           "Scheduler.get_new_batch_prefill with --enable-mixed-chunk)",
    hints=(
        "Every list of the prefill batch keeps its own values first and gets the running batch's after them, "
        "in running_batch's order: input_ids, seq_lens and req_pool_indices as they are, out_cache_loc with "
        "torch.cat (it is a tensor), reqs, and forward_mode = ForwardMode.MIXED.",
        "A running request's row is an extend of one token over its own KV: prefix_lens gets seq_len - 1 "
        "(every token but the one fed now; its outputs count) and extend_lens gets 1. The trace's "
        "sched.batch_formed shows both lists and the row each request's logits come from.",
        "decoding_reqs = list(running_batch.reqs): the scheduler reads it when the round's result comes "
        "back, so that a running request's prompt is not cached again. On each running request set "
        "req.fill_ids = req.origin_input_ids + req.output_ids and req.extend_input_len = 1.",
    ),
)

CONTEXT_CHECK = Lab(
    name="context_check",
    title="The length check: validate_input_length and clamp_max_new_tokens at a request's arrival",
    component="context_check",
    file="context_check.py",
    lesson="limits-failures",
    scenario="context_limit",
    boundaries=("context_boundaries",),
    order=11,
    sglang="python/sglang/srt/managers/utils.py: validate_input_length (and the max_new_tokens clamp in "
           "Scheduler.handle_generate_request, python/sglang/srt/managers/scheduler.py)",
    hints=(
        "validate_input_length: first `if n == 0` (the empty prompt's message), then `if n >= max_req_len`: "
        "a prompt needs room for one output token, so n = max_req_len - 1 is the longest that runs. Return "
        "None when it may run.",
        "The refusal's message is compared word for word in the trace (sched.refused): at most "
        "{max_req_len - 1} fit, the limit is {max_req_len}, then (context length {context_len}, KV cache "
        "{kv_slots} slots) in that order.",
        "clamp_max_new_tokens: `if asked is None or n + asked > max_req_len: return max_req_len - n`, else "
        "asked. An exact fit (n + asked == max_req_len) is not clamped; the trace's sched.req_created shows "
        "the max_new_tokens you gave.",
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
    title="The overlap loop's FutureMap and its results a round late",
    component="future_map",
    file="future_map.py",
    lesson="overlap",
    scenario="overlap_schedule",
    boundaries=("overlap_ring", "overlap_late", "retract_ties"),
    order=13,
    sglang="python/sglang/srt/managers/overlap_utils.py: FutureMap (alloc_future_indices, "
           "resolve_future, store_to_future_map); scheduler.py: event_loop_overlap (the result a round late)",
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
        "split_launched_rows: for each row i, the chunked request goes to keep untouched; a request whose "
        "future_token_ids is empty or starts with another placeholder than placeholders[i] was retracted "
        "(skip it); else pop(0), then late if req.finished() else keep. A kept late row shows as an extra "
        "sched.output_appended after the request's end; a missed late row as a kv.free that never comes.",
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
