"""SchedulerMetricsMixin: what the scheduler reports about its load (SGLang keeps get_load in a mixin
of this name)."""

from __future__ import annotations

from minisgl.scheduler.io_struct import GetLoadReqOutput


class SchedulerMetricsMixin:
    def get_load(self) -> GetLoadReqOutput:
        """The server's /health shows this, so a test can see a finished or aborted request's slots come
        back."""
        return GetLoadReqOutput(
            num_running_reqs=len(self.rid_to_req) - len(self.waiting_queue),  # admitted, not yet finished
            num_waiting_reqs=len(self.waiting_queue),
            free_slots=self.token_to_kv_pool.available_size(),
            cached_slots=self.tree_cache.total_size(),
            total_slots=self.token_to_kv_pool.size,
            dp_rank=self.dp_rank,
        )
