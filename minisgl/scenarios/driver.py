"""Run a scenario on the real engine: the offline Engine driven round by round, or a real server."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable

from minisgl.scenarios.base import TRACE_LEVEL, Abort, Scenario, Submit
from minisgl.server.protocol import GenerateReqInput
from minisgl.server_args import ServerArgs

MAX_LOOPS = 10_000  # a scenario is a few dozen rounds; this only stops a bug from spinning forever


@dataclass
class Outcome:
    """What the run gave back: each request's result (or its error), and the rounds that ran a batch; a
    served run also what its client read besides the requests (`probes`) and how many processes the server
    ran (every one of them ended with it)."""

    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    rounds: int = 0
    probes: dict[str, Any] = field(default_factory=dict)
    server_processes: int = 0


def engine_args(scenario: Scenario) -> dict[str, Any]:
    """Every ServerArgs field: the defaults overlaid with the scenario's flags, so a run never inherits
    another engine's settings (a fork of a shared test engine included)."""
    args = dataclasses.asdict(ServerArgs(**scenario.engine_flags()))
    args.pop("model")
    return args


def run(scenario: Scenario, trace_dir: str, loaded: Any = None) -> Outcome:
    """Run an offline scenario into trace_dir. `loaded`: an Engine whose weights to share (tests)."""
    if scenario.server is not None:
        from minisgl.scenarios.server import run_server

        return run_server(scenario, trace_dir)
    from minisgl.entrypoints.engine import Engine

    args = engine_args(scenario)
    if loaded is not None:
        engine = loaded.fork(trace_dir=trace_dir, trace_level=TRACE_LEVEL, **args)
    else:
        engine = Engine(trace_dir=trace_dir, trace_level=TRACE_LEVEL, **args)
    try:
        return drive(engine, scenario.steps)
    finally:
        engine.shutdown()


def drive(engine: Any, steps: tuple, on_round: Callable[[Any], None] | None = None) -> Outcome:
    """Apply each step once its round has come (sooner only if the engine has nothing to run until then), then
    run rounds until every request is done, exactly as Engine.generate does between its own steps.
    `on_round(scheduler)` is called after every round that ran a batch (tests read the live state there)."""
    pending = sorted(steps, key=lambda s: s.after_round)  # stable: steps of one round keep their order
    sched, states, outcome = engine.scheduler, {}, Outcome()
    for _ in range(MAX_LOOPS):
        due = [s for s in pending if s.after_round <= sched.forward_ct]
        if not due and pending and sched.is_idle():  # nothing would run until then: the next steps come now
            due = [s for s in pending if s.after_round == pending[0].after_round]
        for step in due:
            pending.remove(step)
            if isinstance(step, Submit):
                states[step.rid] = engine.submit(_request(step))
            elif isinstance(step, Abort):
                engine.abort(step.rid)
        if not pending and all(state.finished for state in states.values()) and not sched.result_queue:
            break  # (the overlap loop: its last launched round is processed too, so its KV slots come back)
        before = sched.forward_ct
        engine.step()  # one scheduler round, then the detokenizer
        if on_round is not None and sched.forward_ct > before:
            on_round(sched)
    else:
        raise RuntimeError(f"the scenario did not finish within {MAX_LOOPS} scheduler loops")
    outcome.rounds = sched.forward_ct
    for rid, state in states.items():
        try:
            outcome.results[rid] = engine.result(state)
        except ValueError as e:  # refused before it ran: the error a client would get
            outcome.results[rid] = {"rid": rid, "error": str(e)}
    return outcome


def _request(step: Submit) -> GenerateReqInput:
    if step.ids is not None:
        prompt: dict[str, Any] = {"input_ids": list(step.ids)}
    elif step.chat is not None:
        prompt = {"messages": [{"role": "user", "content": step.chat}]}
    else:
        prompt = {"text": step.text or ""}
    return GenerateReqInput(rid=step.rid, sampling_params=step.sampling_params(), stream=step.stream,
                            **prompt)
