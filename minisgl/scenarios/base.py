"""What a scenario is: fixed engine flags, fixed prompts, and arrivals and aborts at fixed rounds.

A scenario never says "after 50 ms": every step is tied to a scheduler round, so the same scenario gives
the same events and numbers on every run and every machine (times and pids aside).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

# every scenario runs the real model in float32 with greedy sampling, traced at level 3 (every row)
BASE_FLAGS: dict[str, Any] = {"dtype": "float32"}
TRACE_LEVEL = 3


@dataclass(frozen=True)
class Submit:
    """A request that arrives once `after_round` rounds have run (or at once, if the engine is idle).

    The prompt is one of: `text` (tokenized as is), `chat` (one user message through the chat
    template) or `ids` (token ids)."""

    after_round: int
    rid: str
    text: str | None = None
    chat: str | None = None
    ids: tuple[int, ...] | None = None
    max_new_tokens: int = 4
    stream: bool = False
    params: dict[str, Any] = field(default_factory=dict)  # more sampling params: stop, ignore_eos, ...

    def sampling_params(self) -> dict[str, Any]:
        return {"max_new_tokens": self.max_new_tokens, "temperature": 0, **self.params}


@dataclass(frozen=True)
class Abort:
    """The client gives up on `rid` once `after_round` rounds have run."""

    after_round: int
    rid: str


Step = Submit | Abort


@dataclass
class Look:
    """Where to look after the run: a few lines, and the request and round the commands should open."""

    lines: list[str]
    rid: str
    round: int | None = None


@dataclass(frozen=True)
class Scenario:
    """One concept, one run. `look_at(trace)` returns the lines printed after the run: which round and
    which request to look at, computed from the trace it wrote."""

    name: str
    title: str
    teaches: str
    lesson: str  # the lesson page this scenario illustrates
    flags: dict[str, Any]
    steps: tuple[Step, ...] = ()
    look_at: Callable[[Any], Look] | None = None
    # a scenario about HTTP: drives a real server at this URL, giving each request's result by rid (or an
    # Outcome, with what else it read in `probes`)
    server: Callable[[str], Any] | None = None
    server_flags: tuple[str, ...] = ()
    pd_disaggregation: bool = False  # a prefill and a decode server behind SGLang's router (pd_server.py)

    def engine_flags(self) -> dict[str, Any]:
        return {**BASE_FLAGS, **self.flags}
