"""What a run did, in the numbers the lessons quote: for each request its prompt, cached prefix, the rounds
and extend ranges of its prefill (chunks included), retractions, first token, finish; and the rounds, each
with its batch. `minisgl scenario run` prints it, so a changed run (`--set`) can be read beside the lesson's.
"""

from __future__ import annotations

from minisgl.scenarios.look import events, first


def _span(rounds: list[int]) -> str:
    if not rounds:
        return "no round"
    return f"round {rounds[0]}" if len(rounds) == 1 else f"rounds {rounds[0]}-{rounds[-1]}"


def request_lines(trace) -> list[str]:
    """One line per request: the refused ones, then the others in arrival order."""
    lines = [f"{ev.rid}: refused in round {ev.round}: {ev.get('message')}"
             for ev in events(trace, "sched.refused")]
    for created in events(trace, "sched.req_created"):
        rid = created.rid
        mine = trace.by_rid(rid)
        taken = [ev for ev in mine if ev.name == "sched.admission"
                 and ev.get("decision") in ("admitted", "chunked")]
        parts = [f"{rid}: prompt {created.get('input_len')} tokens, arrived in round {created.round}"]
        clamped = created.get("max_new_tokens_clamped")
        if clamped:
            parts.append(f"max_new_tokens clamped from {clamped['from']} to {clamped['to']}")
        if taken:
            ranges = ", ".join(f"[{start}, {end}) in round {ev.round}"
                               for ev in taken for start, end in [ev.get("extend_range")])
            parts.append(f"prefill {ranges}")
            if taken[0].get("prefix_locked"):
                parts.append(f"{taken[0].get('prefix_locked')} prompt tokens from the radix cache")
        retracted = [ev.round for ev in mine if ev.name == "sched.retracted"]
        if retracted:
            parts.append(f"retracted in {_span(retracted)}")
        appended = [ev for ev in mine if ev.name == "sched.output_appended"]
        if appended:
            parts.append(f"first token in round {appended[0].round}")
        done = first(trace, "sched.finished", lambda ev, rid=rid: ev.rid == rid)
        if done is not None:
            reason = (done.get("finish_reason") or {}).get("type")
            parts.append(f"finished by {reason} in round {done.round} "
                         f"after {done.get('output_len')} token(s)")
        lines.append("; ".join(parts))
    return lines


def round_lines(trace) -> list[str]:
    """One line per run of rounds whose batches look alike: forward mode, rows and requests (a speculative
    round's draft rows are counted in its rows)."""
    runs: list[tuple[list[int], str]] = []
    evicted: dict[int, int] = {}
    for ev in events(trace, "cache.evicted"):
        evicted[ev.round] = evicted.get(ev.round, 0) + len(ev.get("slots") or [])
    for ev in events(trace, "sched.batch_formed"):
        rows = len(ev.get("out_cache_loc") or [])
        what = f"{ev.get('forward_mode')} of {rows} row(s) for {', '.join(ev.rids or [])}"
        if evicted.get(ev.round):
            what += f"; the radix cache evicted {evicted[ev.round]} slot(s) for it"
        if runs and runs[-1][1] == what and runs[-1][0][-1] == ev.round - 1:
            runs[-1][0].append(ev.round)
        else:
            runs.append(([ev.round], what))
    return [f"{_span(rounds)}: {what}" for rounds, what in runs]


def summary(trace) -> list[str]:
    """Every line: the requests, then the rounds."""
    return request_lines(trace) + round_lines(trace)
