"""Drive a real offline Engine round by round and record what its live scheduler holds after each round
that ran a batch: the ground truth that replay (rebuilt from the trace alone) must equal."""

from __future__ import annotations

from dataclasses import dataclass, field

from tracer.replay import replay
from tracer.tree import nested


@dataclass
class Arrival:
    """Requests submitted once `after_round` rounds have run (or sooner, if the engine has gone idle)."""

    after_round: int
    requests: list[tuple[str, list[int], dict]]


@dataclass
class LiveRun:
    live: list[dict] = field(default_factory=list)  # the scheduler's state after each round
    results: dict[str, dict] = field(default_factory=dict)  # rid -> what generate() would have returned


def live_state(scheduler) -> dict:
    return {
        "waiting": [r.rid for r in scheduler.waiting_queue],
        "running": [r.rid for r in scheduler.running_batch.reqs],
        "chunked": scheduler.chunked_req.rid if scheduler.chunked_req is not None else None,
        "free": scheduler.token_to_kv_pool.available_size(),
        "tree": scheduler.tree_cache.snapshot(),
    }


def replayed_state(state) -> dict:
    return {
        "waiting": state.waiting,
        "running": state.running,
        "chunked": state.chunked,
        "free": state.free_slots,
        "tree": nested(state.tree),
    }


def drive(engine, arrivals: list[Arrival]) -> LiveRun:
    """Submit each arrival at its round, run rounds until every request is done, as generate() does."""
    pending, submitted, run = sorted(arrivals, key=lambda a: a.after_round), [], LiveRun()
    sched = engine.scheduler
    while pending or any(not engine._states[rid]["done"] for rid in submitted):
        while pending and (pending[0].after_round <= sched.forward_ct or sched.is_idle()):
            for rid, ids, params in pending.pop(0).requests:
                engine._submit(rid, None, ids, params, stream=False)
                submitted.append(rid)
        before = sched.forward_ct
        engine._step()  # one scheduler round, then the detokenizer
        if sched.forward_ct > before:
            run.live.append(live_state(sched))
    run.results = {rid: engine._finish_result(rid) for rid in submitted}
    return run


def assert_replay_is_live(trace, run: LiveRun) -> None:
    states = replay(trace)
    assert len(states) == len(run.live)
    for n, (state, want) in enumerate(zip(states, run.live), start=1):
        assert replayed_state(state) == want, f"round {n}"
