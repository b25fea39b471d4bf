"""One-line bugs learners write in prepare_for_decode and retract_decode (see minisgl/labs/bugs.py)."""

from minisgl.labs.bugs import Bug

_KEY = "key=lambda r: (len(r.output_ids), -len(r.origin_input_ids), r.rid)"

BUGS = (
    Bug("seq_len_without_fed_token", "seq_len leaves out the token fed this round",
        "self.seq_lens = [r.seqlen for r in self.reqs]", "self.seq_lens = [r.seqlen - 1 for r in self.reqs]"),
    Bug("kv_one_past_the_end", "the new token's KV goes to position seq_len, not seq_len - 1",
        "[self.req_pool_indices, [s - 1 for s in self.seq_lens]]", "[self.req_pool_indices, self.seq_lens]"),
    Bug("stale_req_pool_indices", "req_pool_indices is kept from the last round, not rebuilt",
        "        self.req_pool_indices = [r.req_pool_idx for r in self.reqs]\n        self.prefix_lens, self",
        "        self.prefix_lens, self"),
    Bug("alloc_without_evicting", "the decode rows' slots come from the free list, never evicting the cache",
        "self.out_cache_loc = self.alloc_token_slots(len(self.reqs))",
        "self.out_cache_loc = self.token_to_kv_pool.alloc(len(self.reqs))"),
    Bug("alloc_per_request", "one alloc_token_slots(1) per request instead of one for the round",
        "self.out_cache_loc = self.alloc_token_slots(len(self.reqs))",
        "self.out_cache_loc = torch.cat([self.alloc_token_slots(1) for _ in self.reqs])"),
    Bug("retract_most_outputs", "retract the request with the most output tokens first",
        _KEY, "key=lambda r: (-len(r.output_ids), -len(r.origin_input_ids), r.rid)"),
    Bug("retract_shortest_prompt", "on a tie in outputs, retract the shortest prompt first",
        _KEY, "key=lambda r: (len(r.output_ids), len(r.origin_input_ids), r.rid)"),
    Bug("retract_no_rid_tiebreak", "no rid in the sort key: a full tie keeps the batch's order",
        _KEY, "key=lambda r: (len(r.output_ids), -len(r.origin_input_ids))"),
    Bug("retract_from_the_back", "victims are taken from the back of the sorted order",
        "victim = order.pop(0)", "victim = order.pop()"),
    Bug("reset_before_caching", "reset the victim before caching its KV",
        "            self.cache_manager.cache_finished_req(victim, free_reason=\"retracted\")\n"
        "            victim.reset_for_retract()\n",
        "            victim.reset_for_retract()\n"
        "            self.cache_manager.cache_finished_req(victim, free_reason=\"retracted\")\n"),
    Bug("retract_as_finished", "the victim's KV is freed as if it had finished",
        "cache_finished_req(victim, free_reason=\"retracted\")", "cache_finished_req(victim)"),
    Bug("retract_keeps_in_flight_rows", "the overlap loop's in-flight rows of a victim are never freed",
        "            self.free_in_flight_rows(victim)\n", ""),
)
