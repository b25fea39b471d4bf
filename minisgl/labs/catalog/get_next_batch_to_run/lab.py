from minisgl.labs.lab import Lab

LAB = Lab(
    name="get_next_batch_to_run",
    title="The scheduler's choice: merge last round's prefill, prefill first, else decode",
    component="get_next_batch_to_run",
    file="get_next_batch_to_run.py",
    lesson="scheduler-loop",
    scenario="mixed_round",
    boundaries=("batch_merge",),
    order=4,
    sglang="python/sglang/srt/managers/scheduler.py: Scheduler.get_next_batch_to_run",
    hints=(
        "Three steps, in this order: merge last_batch into running_batch (only if it was a prefill batch), "
        "try self.get_new_batch_prefill(), and only if that gives None, decode running_batch. A prefill "
        "batch is never put into running_batch in the round it is formed.",
        "'Was a prefill batch' is last_batch.forward_mode.is_extend(), which is true for EXTEND and MIXED. "
        "Comparing with ForwardMode.EXTEND loses the requests that rode in a MIXED batch: they left "
        "running_batch for that round and only come back through this merge.",
        "The merge: dropped = self.last_batch.filter_batch(chunked_req_to_exclude=self.chunked_req); "
        "dropped += self.running_batch.filter_batch(); then merge_batch, then "
        "self.trace_collector.batch_merged(dropped).",
        "The decode branch: if batch is None and not self.running_batch.is_empty(): self.running_batch = "
        "self.update_running_batch(self.running_batch); run it unless it came back empty (return None then). "
        "Return the running_batch object itself, not a copy: the next round's last_batch is that object.",
    ),
)
