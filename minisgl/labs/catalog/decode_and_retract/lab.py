from minisgl.labs.lab import Lab

LAB = Lab(
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
