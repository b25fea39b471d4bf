"""Lab get_next_batch_to_run (your file). Scheduler.get_next_batch_to_run: choose the batch this round runs.

The scheduler's loop (`Scheduler.run_one_round` in minisgl/scheduler/scheduler.py) calls it once per round,
after the new requests are in `waiting_queue`, and runs whatever it returns:

    recv_requests -> process_input_requests -> get_next_batch_to_run -> run_batch -> process_batch_result

You write it as a module-level function taking `self` (the Scheduler); the lab installs it on the class.
The lesson page that explains it: lessons/docs/lessons/scheduler-loop.md ("The loop", "Round by round").
"""

from __future__ import annotations

from minisgl.scheduler.schedule_batch import ScheduleBatch


def get_next_batch_to_run(self) -> ScheduleBatch | None:
    """Return this round's batch (a new prefill batch, or running_batch for a decode round), or None.

    What you can use on `self` (all of it is the engine's; none of it is yours to write):

    - `self.last_batch`: the batch that ran last round (None before the first). It is a prefill batch when
      `self.last_batch.forward_mode.is_extend()` is true: EXTEND, and also MIXED (a prefill that carried the
      running requests' decode rows; those requests left running_batch for that round and come back here).
    - `self.running_batch`: the requests that decode one token per round.
    - `self.chunked_req`: a prompt still being prefilled a chunk per round, or None. It has no token to
      decode from yet, so it must not join running_batch.
    - `ScheduleBatch.filter_batch(chunked_req_to_exclude=None)` drops the finished requests (and the one you
      name) from a batch and returns the dropped ones; `merge_batch(other)` appends other's requests.
    - `self.get_new_batch_prefill()`: admits waiting requests (and the next chunk of chunked_req) into a new
      prefill batch, or returns None when nothing can be admitted.
    - `self.update_running_batch(batch)`: drops finished requests, makes room (retracting if the KV cache is
      short) and prepares one decode row per request; returns the batch, possibly empty.

    The three steps, in this order:

    1. Merge. If last round's batch was a prefill batch, its requests now decode with the others: filter it
       (leaving out chunked_req), filter running_batch too, and merge last_batch into running_batch. Collect
       every request the two filter_batch calls dropped into one list, `dropped`, and then call
       `self.trace_collector.batch_merged(dropped)` (keep that line exactly: tracing is not part of the lab,
       but the trace records the merge, so it must be reported right after it). A decode batch is not
       merged: it *is* running_batch.
    2. Prefill first. Try `self.get_new_batch_prefill()`; if it gives a batch, that is this round's batch.
    3. Else decode. If running_batch has requests, replace it with `self.update_running_batch(...)` of it,
       and run it, unless it came back empty (then there is nothing to run: return None).

    Do not put the new prefill batch into running_batch: it becomes last_batch, and step 1 of the next round
    merges it. The model worker records the batch it runs in the trace (sched.batch_formed) itself.
    """
    raise NotImplementedError("TODO: get_next_batch_to_run")
