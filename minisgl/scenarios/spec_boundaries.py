"""A grading scenario of the spec_verify lab: n-gram verification at the boundaries the lesson's example (K
drafts every round, no finish inside them) never reaches.

Drafts are earned (the default): a request starts at one draft token, doubles its limit after a round whose
drafts were all accepted (at most K = 3 here) and drops to the number accepted after a rejection, so each
round's draft_lens in the trace depends on how the round before was verified. C counts, so its drafts are
all accepted and its limit climbs 1, 2, 3 and stays at 3; its last round is cut by max_new_tokens (one
token must be left for the bonus row). S copies a list whose drafts are accepted until a stop string ends
it inside them: the rows after the stop are freed with the reason finished. W has nothing to copy, so it
decodes one row in the same batches. P repeats a pattern that the model breaks now and then: a draft is
rejected at once (accepted 0 of 1), later all accepted, then 0 of 2, so its limit falls from 2 back to 1.
"""

from __future__ import annotations

from minisgl.scenarios.base import Look, Scenario, Submit
from minisgl.scenarios.look import events

DONE = {"ignore_eos": True}


def look_at(trace) -> Look:
    lines: list[str] = []
    for ev in events(trace, "sched.spec_verified"):
        rows = zip(ev.rids or [], ev.get("draft_lens") or [], ev.get("accepted_lens") or [],
                   ev.get("appended_lens") or [])
        parts = [f"{rid} {accepted}/{drafts} (+{appended})" for rid, drafts, accepted, appended in rows
                 if drafts]
        if parts:
            lines.append(f"round {ev.round}: drafts accepted " + ", ".join(parts))
    finished = [ev for ev in events(trace, "kv.free") if ev.get("reason") == "finished"]
    for ev in finished[:1]:
        lines.append(f"round {ev.round}: the KV of rows after a finish inside the drafts, {ev.get('slots')}, "
                     "goes back (kv.free, reason finished)")
    return Look(lines or ["no draft was verified"], rid="C")


SCENARIO = Scenario(
    name="spec_boundaries",
    title="Speculative verification at its boundaries",
    teaches="accept_lengths and NGRAMWorker.verify: all drafts accepted (the bonus row after the last), none "
    "accepted, a finish inside the accepted drafts, the earned draft limit doubling to K and falling back",
    lesson="overlap",
    flags={"max_total_tokens": 256, "chunked_prefill_size": -1, "speculative_algorithm": "NGRAM",
           "speculative_num_draft_tokens": 3, "speculative_ngram_min_match_window_size": 2},
    steps=(
        Submit(0, "C", text=" 1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8, 1, 2", max_new_tokens=17,
               params=DONE),
        Submit(0, "S", text=" red, green, blue, red, green, blue, red, green, blue, red,", max_new_tokens=16,
               params={"stop": [" blue, red, green"]}),
        Submit(0, "W", text=" The weather today is", max_new_tokens=10, params=DONE),
        Submit(0, "P", text=" 5, 6, 7, 5, 6, 7, 5, 6, 8, 5, 6,", max_new_tokens=12, params=DONE),
    ),
    look_at=look_at,
)
