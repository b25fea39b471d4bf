from minisgl.labs.lab import Lab

LAB = Lab(
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
