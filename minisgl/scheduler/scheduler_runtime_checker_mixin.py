"""SchedulerRuntimeCheckerMixin: the scheduler's checks of its own memory while idle (SGLang's mixin
of this name)."""

from __future__ import annotations


class SchedulerRuntimeCheckerMixin:
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
