"""One-line bugs learners write in the FutureMap (see minisgl/labs/bugs.py)."""

from minisgl.labs.bugs import Bug

BUGS = (
    Bug("ring_one_batch", "the ring has room for one batch, not three",
        "self.size = 3 * max_running_requests + 1", "self.size = max_running_requests + 1"),
    Bug("ring_without_spare", "the ring leaves out the one extra index",
        "self.size = 3 * max_running_requests + 1", "self.size = 3 * max_running_requests"),
    Bug("index_zero_handed_out", "indices start at 0, whose placeholder -0 is no placeholder",
        "return [(start + i) % self.size + 1 for i in range(bs)]",
        "return [(start + i) % self.size for i in range(bs)]"),
    Bug("counter_moves_one", "the counter moves on by one per call, not one per row",
        "self.future_ct = (self.future_ct + bs) % self.size",
        "self.future_ct = (self.future_ct + 1) % self.size"),
    Bug("start_after_advance", "the batch's indices start where the counter is after advancing it",
        "        start = self.future_ct\n", "        start = (self.future_ct + bs) % self.size\n"),
    Bug("wrap_without_modulo", "an index past the ring's end is not wrapped",
        "return [(start + i) % self.size + 1 for i in range(bs)]",
        "return [start + i + 1 for i in range(bs)]"),
    Bug("resolve_reads_the_id", "a placeholder reads the buffer at its own (negative) id, not at -id",
        "self.token_ids_buf[torch.clamp(-input_ids, min=0)]",
        "self.token_ids_buf[torch.clamp(input_ids, min=0)]"),
    Bug("buffer_one_short", "the buffer has one entry per index, forgetting that index 0 takes one too",
        "torch.zeros(self.size + 1, dtype=torch.int64)", "torch.zeros(self.size, dtype=torch.int64)"),
    Bug("store_one_off", "a token is stored one index below its placeholder's",
        "self.token_ids_buf[future_indices] = torch.tensor(next_token_ids, dtype=torch.int64)",
        "self.token_ids_buf[[k - 1 for k in future_indices]] = torch.tensor(next_token_ids)"),
)
