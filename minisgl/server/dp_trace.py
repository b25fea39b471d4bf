"""The DataParallelController's one trace event, `dp.dispatch`: which rank a request went to, why, and the
loads the decision saw. Returns at once when tracing is off. Fields:
lessons/docs/reference/trace-events.md."""

from __future__ import annotations

from tracer.api import tracer


def dispatched(rid: str, method: str, loads: list[int], dp_rank: int, routed: bool) -> None:
    if not tracer.enabled:
        return
    tracer.event("dp.dispatch", rid=rid, method=method, loads=loads, dp_rank=dp_rank, routed=routed)
