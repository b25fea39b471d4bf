"""One-line bugs learners write in ScheduleBatch.prepare_for_extend (see minisgl/labs/bugs.py)."""

from minisgl.labs.bugs import Bug

# the method's first lines, for the one bug that moves a line
_HEAD = "        self.forward_mode = ForwardMode.EXTEND\n"
_SLOTS = ("        for req in self.reqs:\n            if req.req_pool_idx is None:\n"
          "                (req.req_pool_idx,) = self.req_to_token_pool.alloc(1)\n")
_INDICES = "        self.req_pool_indices = [r.req_pool_idx for r in self.reqs]\n"
_LENS = ("        self.prefix_lens = [len(r.prefix_indices) for r in self.reqs]\n"
         "        self.extend_lens = [r.extend_input_len for r in self.reqs]\n"
         "        self.seq_lens = [p + e for p, e in zip(self.prefix_lens, self.extend_lens)]\n")
_ALLOC = "self.alloc_token_slots(sum(self.extend_lens))"

BUGS = (
    Bug("no_forward_mode", "the batch keeps the mode it was made with, not EXTEND", _HEAD, ""),
    Bug("slot_if_falsy", "a request takes a request slot when req_pool_idx is falsy: slot 0 counts as none",
        "if req.req_pool_idx is None:", "if not req.req_pool_idx:"),
    Bug("slot_for_every_req", "every request takes a request slot, a chunked prompt on its next chunk too",
        _SLOTS, "        for req in self.reqs:\n"
        "            (req.req_pool_idx,) = self.req_to_token_pool.alloc(1)\n"),
    Bug("indices_before_alloc", "req_pool_indices is read before the new requests take their slots",
        _HEAD + _SLOTS + _LENS + _INDICES, _HEAD + _INDICES + _SLOTS + _LENS),
    Bug("extend_from_prompt", "extend_lens is the prompt after the prefix: no output tokens, no chunk",
        "self.extend_lens = [r.extend_input_len for r in self.reqs]",
        "self.extend_lens = [len(r.origin_input_ids) - p for r, p in zip(self.reqs, self.prefix_lens)]"),
    Bug("seq_len_is_prompt_len", "seq_lens is the prompt's length",
        "self.seq_lens = [p + e for p, e in zip(self.prefix_lens, self.extend_lens)]",
        "self.seq_lens = [len(r.origin_input_ids) for r in self.reqs]"),
    Bug("input_from_prompt", "the rows are read from origin_input_ids, not fill_ids",
        "for t in r.fill_ids[p:]]", "for t in r.origin_input_ids[p:]]"),
    Bug("input_with_prefix", "the rows include the cached prefix",
        "for t in r.fill_ids[p:]]", "for t in r.fill_ids]"),
    Bug("alloc_seq_lens", "the round takes KV slots for the whole sequences, prefixes included",
        _ALLOC, "self.alloc_token_slots(sum(self.seq_lens))"),
    Bug("alloc_from_pool", "the KV slots come straight from the pool: no eviction, nothing journaled",
        _ALLOC, "self.token_to_kv_pool.alloc(sum(self.extend_lens))"),
    Bug("out_cache_loc_int32", "out_cache_loc is made int32", _ALLOC, _ALLOC + ".int()"),
    Bug("prefix_not_written", "the cached prefix's slots are not written into the request's row",
        "            row_of[req.req_pool_idx, :prefix] = req.prefix_indices\n", ""),
    Bug("new_slots_at_column_0", "the new slots are written from column 0, over the prefix",
        "row_of[req.req_pool_idx, prefix:seq] =", "row_of[req.req_pool_idx, : seq - prefix] ="),
    Bug("offset_not_advanced", "every request's row gets the first slots of out_cache_loc",
        "            start += seq - prefix\n", ""),
    Bug("offset_by_seq_len", "the offset into out_cache_loc moves by seq_len, prefix included",
        "            start += seq - prefix\n", "            start += seq\n"),
)
