"""The overlap scheduler (SGLang's event_loop_overlap): round N's forward runs on the forward thread while
this thread processes round N-1's result and then forms round N+1.

    recv_requests -> process_input_requests -> get_next_batch_to_run -> launch_batch (round N)
                  -> process_batch_result_overlap (round N-1)

What changes against the normal loop:
- A round is formed before the previous round's tokens exist. A request's not-yet-sampled tokens are
  placeholders (Req.future_token_ids, FutureMap indices as -k); its next decode row reads the newest one,
  and the forward thread resolves it (tp_worker_overlap_thread.py).
- Results are processed one round late, so finishing (EOS, max_new_tokens, a stop string, an abort) is
  seen a round late too: a request that finished may already sit in the next launched round. That extra
  row's token is dropped and its KV slot freed when its round is processed. A request retracted while its
  round is in flight loses that round's token (it is recomputed when the request resumes).
- The chunk a chunked prompt ran last round enters the prefix cache when the next round is formed (its
  next chunk starts from it), not when its result is processed.
"""

from __future__ import annotations

from collections import deque
from dataclasses import replace
from typing import TYPE_CHECKING

from minisgl.scheduler.overlap_utils import split_launched_rows
from minisgl.scheduler.tp_worker_overlap_thread import TpModelWorkerClient
from minisgl.scheduler.utils import GenerationBatchResult

if TYPE_CHECKING:
    from minisgl.scheduler.schedule_batch import ScheduleBatch


class SchedulerOverlapMixin:
    def init_overlap(self) -> None:
        self.enable_overlap = self.server_args.overlap_schedule()
        # launched rounds not yet processed: (the batch as launched, its placeholders, its round)
        self.result_queue: deque[tuple[ScheduleBatch, list[int], int]] = deque()
        self.tp_worker_client = (TpModelWorkerClient(self.tp_worker, self.server_args.max_running_requests)
                                 if self.enable_overlap else None)

    def run_one_round_overlap(self, block: bool = False) -> ScheduleBatch | None:
        self.trace_collector.round_begin()
        recv_reqs = self.recv_requests(block=block and self.nothing_to_run())
        self.process_input_requests(recv_reqs)
        self.cache_last_chunk()
        batch = self.get_next_batch_to_run()
        self.cur_batch = batch
        if batch is not None:
            self.trace_collector.batch_formed(batch)
            self.launch_batch(batch)  # round N runs on the forward thread from here on
        if len(self.result_queue) > (1 if batch is not None else 0):  # round N-1 (or the last one)
            launched, placeholders, round_ = self.result_queue.popleft()
            result = self.tp_worker_client.resolve_last_batch_result()
            self.trace_collector.result_of_round(round_)
            self.process_batch_result_overlap(launched, placeholders, result)
        if batch is not None:
            self.trace_collector.round_end()
        elif not self.result_queue:
            self.self_check_during_idle()
        self.last_batch = batch
        return batch

    def cache_last_chunk(self) -> None:
        """The chunk last round ran enters the prefix cache now: its prompt's next chunk starts from it."""
        last = self.last_batch
        if last is not None and last.chunked_req is not None and last.chunked_req in last.reqs:
            self.cache_manager.cache_unfinished_req(last.chunked_req)

    def launch_batch(self, batch: ScheduleBatch) -> None:
        self.forward_ct += 1
        launched = batch.copy()  # the scheduler changes `batch` while this round runs
        placeholders = self.tp_worker_client.forward_batch_generation(launched, self.forward_ct)
        for req, placeholder in zip(batch.reqs, placeholders):
            if req is not batch.chunked_req:  # an intermediate chunk samples nothing
                req.future_token_ids.append(placeholder)
        self.result_queue.append((launched, placeholders, self.forward_ct))

    def process_batch_result_overlap(self, batch: ScheduleBatch, placeholders: list[int],
                                     result: GenerationBatchResult) -> None:
        """Keep the rows whose request still waits for this token; free the extra rows of finished ones."""
        keep, late = split_launched_rows(batch.reqs, placeholders, batch.chunked_req)
        for i in late:  # it finished a round late: this row ran after its end
            self.cache_manager.free_slots(batch.last_row_slot(i), "finished")
        kept = replace(batch, reqs=[batch.reqs[i] for i in keep])

        def pick(values):
            return None if values is None else [values[i] for i in keep]

        self.process_batch_result(kept, replace(
            result, next_token_ids=pick(result.next_token_ids), logprobs=pick(result.logprobs),
            top_logprobs_val=pick(result.top_logprobs_val), top_logprobs_idx=pick(result.top_logprobs_idx),
            input_token_logprobs=pick(result.input_token_logprobs),
            input_top_logprobs_val=pick(result.input_top_logprobs_val),
            input_top_logprobs_idx=pick(result.input_top_logprobs_idx)))
        self.running_batch.filter_batch()  # finished requests leave running_batch now, as in the normal loop
