"""TpModelWorkerClient: the TpModelWorker on a forward thread of its own
(SGLang's tp_worker_overlap_thread.py).

The scheduler thread hands it a launched round and gets the round's placeholders back at once; the
forward thread runs the rounds in launch order: resolve the placeholders in the input ids from the
FutureMap, forward, sample, store the sampled tokens in the FutureMap, and put the result on the output
queue, where the scheduler picks it up one round later (resolve_last_batch_result).

Running the rounds strictly in order on one thread is what makes the overlap safe: a KV slot the scheduler
frees while round N runs may go to round N+1, whose forward starts only after round N's ended.
"""

from __future__ import annotations

import queue
import threading

import torch

from minisgl.scheduler.overlap_utils import FutureMap
from minisgl.scheduler.schedule_batch import ScheduleBatch
from minisgl.scheduler.tp_worker import TpModelWorker
from minisgl.scheduler.utils import GenerationBatchResult
from tracer.api import tracer

FORWARD_THREAD = "forward"  # the thread's name, and the `thread` its trace events carry


class TpModelWorkerClient:
    def __init__(self, worker: TpModelWorker, max_running_requests: int):
        self.worker = worker
        self.future_map = FutureMap(max_running_requests)
        self.input_queue: queue.Queue = queue.Queue()
        self.output_queue: queue.Queue = queue.Queue()
        self.num_threads = torch.get_num_threads()  # a new thread starts with OpenMP's default, not this
        self.forward_thread = threading.Thread(target=self.forward_thread_func, name=FORWARD_THREAD,
                                               daemon=True)
        self.forward_thread.start()

    def forward_batch_generation(self, batch: ScheduleBatch, round_: int) -> list[int]:
        """Launch a round (a copy the scheduler no longer changes); returns its sampled tokens'
        placeholders."""
        future_indices = self.future_map.alloc_future_indices(batch.batch_size())
        self.input_queue.put((batch, future_indices, round_))
        return [-i for i in future_indices]

    def resolve_last_batch_result(self) -> GenerationBatchResult:
        """Wait for the oldest launched round's result (an error on the forward thread is raised here)."""
        out = self.output_queue.get()
        if isinstance(out, BaseException):
            raise out
        return out

    def forward_thread_func(self) -> None:
        torch.set_grad_enabled(False)
        torch.set_num_threads(self.num_threads)
        while (item := self.input_queue.get()) is not None:
            batch, future_indices, round_ = item
            try:
                with tracer.on_thread(FORWARD_THREAD, round_):
                    batch.input_ids = self.future_map.resolve_future_token_ids(
                        torch.as_tensor(batch.input_ids, dtype=torch.int64))
                    result = self.worker.forward_and_sample(batch)
                self.future_map.store_to_future_map(future_indices, result.next_token_ids)
                self.output_queue.put(result)
            except BaseException as e:  # handed to the scheduler thread, which raises it
                self.output_queue.put(e)

    def close(self) -> None:
        """Stop the forward thread once the rounds already launched have run."""
        if self.forward_thread.is_alive():
            self.input_queue.put(None)
            self.forward_thread.join()
