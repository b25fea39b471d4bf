from minisgl.labs.lab import Lab

LAB = Lab(
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
