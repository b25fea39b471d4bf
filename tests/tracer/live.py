"""Drive a real offline Engine round by round and record what its live scheduler holds after each round
that ran a batch: the ground truth that replay (rebuilt from the trace alone) must equal."""

from __future__ import annotations

from dataclasses import dataclass, field

from minisgl.scenarios.base import Submit
from minisgl.scenarios.driver import drive as scenario_drive
from tracer.replay import replay
from tracer.tree import nested


@dataclass
class Arrival:
    """Requests submitted once `after_round` rounds have run (sooner only if nothing would run until then)."""

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
    """Submit each arrival at its round (the scenarios' driver), recording the live state after each round."""
    steps = tuple(Submit(a.after_round, rid, ids=tuple(ids), max_new_tokens=params["max_new_tokens"],
                         params={k: v for k, v in params.items() if k != "max_new_tokens"})
                  for a in arrivals for rid, ids, params in a.requests)
    run = LiveRun()
    outcome = scenario_drive(engine, steps, on_round=lambda sched: run.live.append(live_state(sched)))
    run.results = outcome.results
    return run


def assert_replay_is_live(trace, run: LiveRun) -> None:
    states = replay(trace)
    assert len(states) == len(run.live)
    for n, (state, want) in enumerate(zip(states, run.live), start=1):
        assert replayed_state(state) == want, f"round {n}"
