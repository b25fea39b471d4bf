"""Lab mix_with_running (your file): ScheduleBatch.mix_with_running, the MIXED round of --enable-mixed-chunk.

Without it a round is either a prefill (EXTEND: new prompts or a prompt's next chunk) or a decode (DECODE: one
row per running request). With --enable-mixed-chunk, when a prefill batch is formed while requests are
running, the scheduler (get_new_batch_prefill in minisgl/scheduler/scheduler.py) prepares the running batch
for decode as usual and then calls your method on the new prefill batch:

    new_batch.prepare_for_extend()             the prompts' rows (their KV slots taken, req_to_token written)
    running_batch.prepare_for_decode()         one row and one new KV slot per running request
    new_batch.mix_with_running(running_batch)  YOU: the decode rows appended to the prefill's, as extends
    running_batch = empty                      its requests come back with last_batch next round

In one forward, every row is an extend row: a running request's decode row is an extend of one token over
its own KV (its prefix is everything before that token). The trace's sched.batch_formed records the MIXED
batch you leave.
"""

from __future__ import annotations

import torch  # noqa: F401  (out_cache_loc is a tensor)

from minisgl.model_executor.forward_batch_info import ForwardMode  # noqa: F401  (you set MIXED)


def mix_with_running(self, running_batch) -> None:
    """Append the running requests' decode rows to this prefill batch, after its own rows.

    running_batch has been through prepare_for_decode: its input_ids (each request's newest token),
    seq_lens, req_pool_indices and out_cache_loc (one new slot each, already written to req_to_token).

    Set, keeping this batch's own values first and the running ones after them, in running_batch's order:
      forward_mode       ForwardMode.MIXED
      input_ids          + the running batch's input_ids
      out_cache_loc      + the running batch's out_cache_loc (both tensors: torch.cat)
      prefix_lens        + each running request's seq_len - 1 (all its tokens but the one fed now)
      extend_lens        + 1 per running request
      seq_lens           + the running batch's seq_lens
      req_pool_indices   + the running batch's req_pool_indices
      reqs               + the running requests
      decoding_reqs      the running requests (a list of its own): the scheduler knows by it which requests
                         of the batch decode (their prompt is not cached again when the round's result
                         comes back)
    and, on each running request, what an extend of one token looks like: req.fill_ids = its prompt then
    its outputs (origin_input_ids + output_ids), req.extend_input_len = 1.
    """
    raise NotImplementedError("TODO: mix_with_running")
