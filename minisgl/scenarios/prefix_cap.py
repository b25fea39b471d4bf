"""The prefix match's cap: a prompt cached to its last token still computes that last token, because the
next token is sampled from its logits. match_prefix is asked about every token but the last, so a fully
cached prompt gets a prefix of input_len - 1 and one row."""

from __future__ import annotations

from minisgl.scenarios.base import Look, Scenario, Submit
from minisgl.scenarios.look import first

DONE = {"ignore_eos": True}
PROMPT = " red green blue yellow orange purple"


def look_at(trace) -> Look:
    hit = first(trace, "sched.prefix_matched", lambda ev: ev.rid == "B")
    made = first(trace, "sched.req_created", lambda ev: ev.rid == "B")
    if hit is None or made is None:
        return Look(["B never matched a prefix"], rid="B")
    n = made.get("input_len")
    return Look([f"round {hit.round}: B's {n}-token prompt is all in the tree, but match_prefix is asked "
                 f"about its first {n - 1} tokens only: prefix {hit.get('prefix_len')}, one row computed "
                 "for the last token, whose logits give B's first output token"], rid="B", round=hit.round)


SCENARIO = Scenario(
    name="prefix_cap",
    title="A prompt cached whole still runs its last token",
    teaches="the prefix match capped at input_len - 1: one row computed, its logits sampled; cached_tokens "
    "input_len - 1",
    lesson="radix-cache",
    flags={"max_total_tokens": 64, "chunked_prefill_size": -1},
    steps=(
        Submit(0, "A", text=PROMPT, max_new_tokens=2, params=DONE),
        Submit(99, "B", text=PROMPT, max_new_tokens=2, params=DONE),  # once A has finished
    ),
    look_at=look_at,
)
