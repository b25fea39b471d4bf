"""Scenarios: named, reproducible runs of the real engine, one concept of the course each.

    minisgl scenario list
    minisgl scenario run shared_prefix --trace traces/shared_prefix

Each scenario is one small module here with a `SCENARIO` (see base.py): fixed flags, fixed prompts, and
arrivals and aborts at fixed rounds, so its trace is the same on every run and machine (times and pids
aside). Lessons draw their figures from these traces; labs diff a learner's trace against them.
"""

from __future__ import annotations

import importlib

from minisgl.scenarios.base import Scenario

# in the order of the course
NAMES = (
    "one_request",
    "shared_prefix",
    "packed_rows",
    "radix_cache",
    "prefix_cap",
    "admission_budgets",
    "lpm_order",
    "chunked_prefill",
    "retract",
    "mixed_round",
    "stream_detok",
    "structured_output",
    "tool_call",
    "abort",
    "client_disconnect",
    "context_limit",
    "overlap_schedule",
    "ngram_speculative",
    "data_parallel",
    "tensor_parallel",
    "pd_disaggregation",
)

# the labs' grading scenarios: each drives one component to its boundaries (an exact fit, a tie, an order)
# that the course's worked examples never reach; `minisgl lab grade` runs them after the lesson's scenario
GRADING = (
    "radix_boundaries",
    "retract_ties",
    "batch_merge",
    "admission_boundaries",
    "tm_outputs",
    "tm_disconnect",
    "tm_refused",
    "spec_boundaries",
    "overlap_ring",
    "overlap_late",
    "mixed_boundaries",
    "context_boundaries",
)


class UnknownScenario(LookupError):
    pass


def get(name: str) -> Scenario:
    if name not in NAMES and name not in GRADING:
        raise UnknownScenario(
            f"no scenario named {name!r}; `minisgl scenario list` shows the {len(NAMES)} there are"
        )
    return importlib.import_module(f"minisgl.scenarios.{name}").SCENARIO


def all_scenarios() -> list[Scenario]:
    return [get(name) for name in NAMES]
