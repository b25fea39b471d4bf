"""The seam between the scheduler and its trace collectors: the scheduler state a collector reads, and the
guard every hook has (trace_collector.py, and disaggregation/disagg_trace.py for --disaggregation-mode)."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Protocol

from tracer.api import tracer

if TYPE_CHECKING:
    from minisgl.mem_cache.cache_manager import CacheManager
    from minisgl.scheduler.req import Req
    from minisgl.scheduler.schedule_batch import ScheduleBatch
    from minisgl.scheduler.schedule_policy import SchedulePolicy
    from minisgl.server_args import ServerArgs


class Scheduler(Protocol):
    """The scheduler state the hooks read (a Protocol: no collector imports the Scheduler class)."""

    server_args: ServerArgs
    tokenizer: Any
    forward_ct: int  # rounds that ran a batch
    waiting_queue: list[Req]
    running_batch: ScheduleBatch
    chunked_req: Req | None
    last_batch: ScheduleBatch | None
    policy: SchedulePolicy
    tree_cache: Any
    token_to_kv_pool: Any
    cache_manager: CacheManager  # its journal of KV moves is the collector's to read and empty
    disaggregation_mode: Any
    disagg_trace: Any  # disaggregation/disagg_trace.py's collector, with --disaggregation-mode


def hook(fn):
    """Nothing while tracing is off; else report the pending KV moves, then the hook's own events."""

    @functools.wraps(fn)
    def guarded(self, *args, **kwargs) -> None:
        if not tracer.enabled:
            return
        # the forward thread (overlap loop) leaves the KV journal to the scheduler's
        if tracer.thread is None:
            self._report_cache_ops()
        fn(self, *args, **kwargs)

    return guarded
