"""SchedulerMetricsMixin: what the scheduler knows of its own memory — the load it reports (/health,
/get_load) and the check, while idle, that no KV slot or request slot leaked. SGLang keeps get_load in a
mixin of this name and the idle check in SchedulerRuntimeCheckerMixin; here the two share one."""

from __future__ import annotations

from minisgl.scheduler.io_struct import FlushCacheReq, FlushCacheReqOutput, GetLoadReq, GetLoadReqOutput


class SchedulerMetricsMixin:
    def answer_control_req(self, recv_req: FlushCacheReq | GetLoadReq
                           ) -> FlushCacheReqOutput | GetLoadReqOutput:
        """The reply to /flush_cache or /health, addressed to the tokenizer worker that asked."""
        if isinstance(recv_req, FlushCacheReq):
            reply = FlushCacheReqOutput(success=self.flush_cache(), dp_rank=self.dp_rank)
        else:
            reply = self.get_load()
        reply.http_worker_ipc = recv_req.http_worker_ipc
        return reply

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

    def self_check_during_idle(self) -> None:
        """When nothing is queued or running, every KV slot must be free or held by the radix cache."""
        if not self.is_idle():
            return
        free, cached = self.token_to_kv_pool.available_size(), self.tree_cache.total_size()
        if free + cached != self.token_to_kv_pool.size:
            raise RuntimeError(
                f"KV cache leak: {free} free + {cached} cached != {self.token_to_kv_pool.size} slots "
                "while idle"
            )
        if self.req_to_token_pool.available_size() != self.req_to_token_pool.size:
            raise RuntimeError("request slot leak: request slots are held while idle")
