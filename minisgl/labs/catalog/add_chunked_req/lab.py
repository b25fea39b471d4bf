from minisgl.labs.lab import Lab

LAB = Lab(
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
