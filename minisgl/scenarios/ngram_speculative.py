"""N-gram speculative decoding (--speculative-algorithm NGRAM): a request whose own tokens repeat gets draft
tokens copied from the earlier occurrence, and one TARGET_VERIFY forward checks them all at once."""

from __future__ import annotations

from minisgl.scenarios.base import Look, Scenario, Submit
from minisgl.scenarios.look import events

DONE = {"ignore_eos": True}


def look_at(trace) -> Look:
    lines: list[tuple[int, str]] = []  # (round, line), shown in round order
    best = None  # the round where a request kept the most drafts
    for ev in events(trace, "sched.spec_verified"):
        rows = zip(ev.rids or [], ev.get("draft_lens") or [], ev.get("accepted_lens") or [],
                   ev.get("appended_lens") or [])
        for rid, drafts, accepted, appended in rows:
            if drafts and (best is None or accepted > best[2]):
                best = (ev.round, rid, accepted, drafts, appended)
    if best is not None:
        round_, rid, accepted, drafts, appended = best
        lines.append((round_, f"round {round_}: {rid} verifies {drafts} draft tokens in one forward "
                              f"({drafts + 1} rows) and keeps {accepted}: {appended} new tokens in one "
                              f"round"))
    rejected = next((ev for ev in events(trace, "kv.free") if ev.get("reason") == "rejected"), None)
    if rejected is not None:
        slots = rejected.get("slots")
        lines.append((rejected.round, f"round {rejected.round}: the KV slots {slots} of draft tokens the "
                                      f"model did not agree with go back to the pool (kv.free, reason "
                                      f"rejected)"))
    for ev in events(trace, "sched.spec_verified"):
        if "B" in (ev.rids or []) and not ev.get("draft_lens")[ev.rids.index("B")]:
            lines.append((ev.round, f"round {ev.round}: B has no repeated n-gram, so it decodes one row "
                                    f"in the same batch"))
            break
    return Look([line for _, line in sorted(lines, key=lambda x: x[0])] or ["no draft was verified"],
                rid=best[1] if best else "A", round=best[0] if best else None)


SCENARIO = Scenario(
    name="ngram_speculative",
    title="N-gram speculative decoding: drafts from the request's own tokens",
    teaches="--speculative-algorithm NGRAM: draft tokens from an earlier n-gram match, one TARGET_VERIFY "
    "forward with 1 + K rows per request, the longest greedy-consistent prefix kept, rejected draft slots "
    "freed",
    lesson="overlap",
    # K drafts from the first round on (--disable-adaptive-draft), so that one forward shows all 1 + K rows
    flags={"max_total_tokens": 256, "chunked_prefill_size": -1, "speculative_algorithm": "NGRAM",
           "speculative_num_draft_tokens": 4, "disable_adaptive_draft": True},
    steps=(
        # after " 1, 2" the earlier matches draft " 3, 1, 2" (the most recent one: " 4, 1, 2")
        Submit(0, "A", text=" 1, 2, 3, 1, 2, 4, 1, 2", max_new_tokens=8, params=DONE),
        Submit(0, "B", text=" The weather today is", max_new_tokens=6, params=DONE),
    ),
    look_at=look_at,
)
