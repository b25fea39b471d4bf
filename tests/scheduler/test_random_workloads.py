"""Property-based: random arrivals, lengths, budgets and aborts never deadlock or leak, and every
request ends with a finish reason."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minisgl.scheduler.io_struct import AbortReq, TokenizedGenerateReqInput

from .conftest import assert_no_leak

MAX_ROUNDS = 600

request = st.fixed_dictionaries({
    "arrive": st.integers(0, 12),  # the round it arrives in
    "prompt": st.lists(st.integers(100, 4000), min_size=1, max_size=48),
    "share": st.integers(0, 20),  # how many leading tokens it copies from a common prefix
    "max_new_tokens": st.integers(1, 10),
    "abort_at": st.none() | st.integers(0, 20),
})
config = st.fixed_dictionaries({
    "max_total_tokens": st.integers(80, 200),
    "max_running_requests": st.integers(1, 6),
    "chunked_prefill_size": st.sampled_from([-1, 8, 24]),
    "enable_mixed_chunk": st.booleans(),
    "disable_radix_cache": st.booleans(),
    "schedule_policy": st.sampled_from(["fcfs", "lpm"]),
})
COMMON = list(range(500, 520))


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(reqs=st.lists(request, min_size=1, max_size=7), cfg=config)
def test_random_workload(base_engine, reqs, cfg):
    engine = base_engine.fork(**cfg)
    sched = engine.scheduler
    finished: dict[str, dict] = {}
    for rnd in range(MAX_ROUNDS):
        for i, r in enumerate(reqs):
            rid = f"r{i}"
            if r["arrive"] == rnd:
                ids = COMMON[: r["share"]] + r["prompt"]
                params = {"max_new_tokens": r["max_new_tokens"], "temperature": 0, "ignore_eos": True}
                engine._to_scheduler.send(TokenizedGenerateReqInput(rid=rid, input_text=None, input_ids=ids,
                                                            sampling_params=params))
            if r["abort_at"] is not None and r["arrive"] + r["abort_at"] == rnd:
                engine._to_scheduler.send(AbortReq(rid=rid))
        sched.run_one_round()
        for out in engine._to_detokenizer.recv_all():
            for rid, reason in zip(out.rids, out.finished_reasons):
                if reason is not None:
                    assert rid not in finished, f"{rid} finished twice"
                    finished[rid] = reason
        if len(finished) == len(reqs) and sched.is_idle():
            break
    else:
        raise AssertionError(f"no progress after {MAX_ROUNDS} rounds: {len(finished)}/{len(reqs)} finished")
    assert all(reason["type"] in ("stop", "length", "abort") for reason in finished.values())
    sched.run_one_round()  # an idle round runs the scheduler's own leak check
    assert_no_leak(engine)
