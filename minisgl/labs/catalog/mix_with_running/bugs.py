"""One-line bugs learners write in the mixed round (see minisgl/labs/bugs.py)."""

from minisgl.labs.bugs import Bug

BUGS = (
    Bug("mode_left_extend", "the batch keeps forward_mode EXTEND",
        "        self.forward_mode = ForwardMode.MIXED\n", ""),
    Bug("decode_rows_first", "the decode rows are put before the prefill's rows",
        "self.input_ids += running_batch.input_ids",
        "self.input_ids = running_batch.input_ids + self.input_ids"),
    Bug("slots_in_other_order", "the new KV slots are joined decode first",
        "torch.cat([self.out_cache_loc, running_batch.out_cache_loc])",
        "torch.cat([running_batch.out_cache_loc, self.out_cache_loc])"),
    Bug("prefix_is_seq_len", "a decode row's prefix is its whole length, the fed token included",
        "self.prefix_lens += [s - 1 for s in running_batch.seq_lens]",
        "self.prefix_lens += list(running_batch.seq_lens)"),
    Bug("prefix_of_outputs", "a decode row's prefix counts only its prompt",
        "self.prefix_lens += [s - 1 for s in running_batch.seq_lens]",
        "self.prefix_lens += [len(r.origin_input_ids) for r in running_batch.reqs]"),
    Bug("seq_lens_one_short", "a decode row's seq_len leaves out the fed token",
        "self.seq_lens += running_batch.seq_lens",
        "self.seq_lens += [s - 1 for s in running_batch.seq_lens]"),
    Bug("pool_indices_forgotten", "the running requests' req_pool_indices are not appended",
        "        self.req_pool_indices += running_batch.req_pool_indices\n", ""),
    Bug("decoding_reqs_forgotten", "decoding_reqs is not set: the running requests' prompts are cached again",
        "        self.decoding_reqs = list(running_batch.reqs)\n", ""),
    Bug("extend_len_of_outputs", "a decode row's extend length counts all its outputs",
        "self.extend_lens += [1] * running_batch.batch_size()",
        "self.extend_lens += [len(r.output_ids) for r in running_batch.reqs]"),
)
