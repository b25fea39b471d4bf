"""One-line bugs learners write in Scheduler.get_next_batch_to_run (see minisgl/labs/bugs.py)."""

from minisgl.labs.bugs import Bug

_IF_EXTEND = "if self.last_batch is not None and self.last_batch.forward_mode.is_extend():"
_DECODE = ("        batch = self.get_new_batch_prefill()\n"
           "        if batch is None and not self.running_batch.is_empty():\n"
           "            self.running_batch = self.update_running_batch(self.running_batch)\n"
           "            batch = None if self.running_batch.is_empty() else self.running_batch\n")

BUGS = (
    Bug("merge_only_extend_mode", "only an EXTEND batch is merged, not a MIXED one",
        _IF_EXTEND, "if self.last_batch is not None and self.last_batch.forward_mode.name == \"EXTEND\":"),
    Bug("merge_every_batch", "last_batch is merged whatever its mode, a decode batch into itself",
        _IF_EXTEND, "if self.last_batch is not None:"),
    Bug("merge_the_chunked_req", "the request still being chunked joins running_batch",
        "dropped = self.last_batch.filter_batch(chunked_req_to_exclude=self.chunked_req)",
        "dropped = self.last_batch.filter_batch()"),
    Bug("merge_keeps_finished_prefill",
        "only the chunked request is kept out: ones finished at prefill join",
        "            dropped = self.last_batch.filter_batch(chunked_req_to_exclude=self.chunked_req)\n",
        "            dropped = [r for r in self.last_batch.reqs if r is self.chunked_req]\n"
        "            self.last_batch.reqs = [r for r in self.last_batch.reqs"
        " if r is not self.chunked_req]\n"),
    Bug("merge_new_first", "the new requests are put ahead of the running ones",
        "self.running_batch.merge_batch(self.last_batch)",
        "self.running_batch.reqs = self.last_batch.reqs + self.running_batch.reqs"),
    Bug("decode_before_prefill", "running_batch decodes first; a prefill runs only when nothing decodes",
        _DECODE,
        "        batch = None\n"
        "        if not self.running_batch.is_empty():\n"
        "            self.running_batch = self.update_running_batch(self.running_batch)\n"
        "            batch = None if self.running_batch.is_empty() else self.running_batch\n"
        "        batch = batch or self.get_new_batch_prefill()\n"),
    Bug("prefill_only_when_idle", "new requests are prefilled only when nothing is running",
        "        batch = self.get_new_batch_prefill()\n",
        "        batch = self.get_new_batch_prefill() if self.running_batch.is_empty() else None\n"),
    Bug("decode_without_update", "running_batch is prepared for decode without update_running_batch",
        "            self.running_batch = self.update_running_batch(self.running_batch)\n",
        "            self.running_batch.prepare_for_decode()\n"),
    Bug("decode_a_copy", "a copy of running_batch is run, not the batch itself",
        "batch = None if self.running_batch.is_empty() else self.running_batch",
        "batch = None if self.running_batch.is_empty() else self.running_batch.copy()"),
)
