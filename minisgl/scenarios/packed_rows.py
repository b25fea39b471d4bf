"""Two new prompts packed into one EXTEND (the source documents' example): 4 tokens and 3 tokens, 7 rows.
Each request has its own req_to_token row, the rows start at [0, 4] (SGLang's cumulative lengths [0, 4, 7]),
positions restart at 0 for the second request, and each request's rows attend only to its own tokens."""

from __future__ import annotations

from minisgl.scenarios.base import Look, Scenario, Submit
from minisgl.scenarios.look import batches

DONE = {"ignore_eos": True}


def look_at(trace) -> Look:
    ext = next((ev for ev in batches(trace) if ev.get("forward_mode") == "EXTEND"), None)
    if ext is None:
        return Look(["no EXTEND round ran"], rid="A")
    starts, at = [], 0
    for n in ext.get("extend_lens"):
        starts.append(at)
        at += n
    line = (f"round {ext.round}: {len(ext.rids)} requests, {at} rows; extend_lens {ext.get('extend_lens')}, "
            f"each request's rows start at {starts} (with the end: {starts + [at]}); req_pool_indices "
            f"{ext.get('req_pool_indices')}; logit rows {ext.get('logit_rows')}")
    return Look([line], rid="B", round=ext.round)


SCENARIO = Scenario(
    name="packed_rows",
    title="Two prompts packed in one batch",
    teaches="a packed EXTEND: each request's req_to_token row, extend_start_loc [0, 4] and the cumulative "
    "[0, 4, 7], positions per request, attention within each request only",
    lesson="batch-rows",
    flags={"max_total_tokens": 64, "chunked_prefill_size": -1},
    steps=(
        Submit(0, "A", text=" red green blue yellow", max_new_tokens=2, params=DONE),
        Submit(0, "B", text=" one two three", max_new_tokens=2, params=DONE),
    ),
    look_at=look_at,
)
