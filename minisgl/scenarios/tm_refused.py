"""A grading scenario of the tm_wait_loop lab: a request the scheduler refuses. The TokenizerManager refuses
what it can check itself (too long, empty, a duplicate rid) before sending; what only the scheduler knows
comes back as the request's one output, finished as abort with an HTTP status, which _wait_one_response must
raise (`refusal(meta)`) rather than yield as text. A decode server of a PD pair (--disaggregation-mode
decode) refuses every request that does not come through the router, so one plain request, with and
without stream, shows it on every run."""

from __future__ import annotations

import json

from minisgl.scenarios.base import Look, Scenario
from minisgl.scenarios.look import first


def drive(url: str) -> dict:
    import httpx

    from minisgl.scenarios.http_client import wait_idle

    results = {}
    for rid, stream in (("PLAIN", False), ("STREAMED", True)):
        body = {"rid": rid, "text": " one two three", "stream": stream,
                "sampling_params": {"max_new_tokens": 2, "temperature": 0}}
        resp = httpx.post(f"{url}/generate", json=body, timeout=300)
        if stream:  # the error comes as the stream's one event, after a 200 status line
            events = [json.loads(line[6:]) for line in resp.text.splitlines()
                      if line.startswith("data: ") and line != "data: [DONE]"]
            results[rid] = {"rid": rid, "error": json.dumps(events[0]) if events else resp.text}
        else:
            if resp.status_code != 400:
                raise RuntimeError(f"{rid}: expected the scheduler's 400, got {resp.status_code}: "
                                   f"{resp.text[:300]}")
            results[rid] = {"rid": rid, "error": resp.text}
        wait_idle(url)
    return results


def look_at(trace) -> Look:
    refused = first(trace, "sched.refused", lambda ev: ev.rid == "PLAIN")
    error = first(trace, "http.error", lambda ev: ev.rid == "PLAIN")
    lines = [f"round {refused.round}: the scheduler refuses PLAIN: {refused.get('message')}" if refused
             else "the scheduler did not refuse PLAIN"]
    if error is not None:
        lines.append(f"the TokenizerManager raises it: http.error {error.get('status')}")
    return Look(lines, rid="PLAIN")  # no batch ever runs: the refusal comes before any round


SCENARIO = Scenario(
    name="tm_refused",
    title="A request only the scheduler refuses",
    teaches="_wait_one_response raises the scheduler's refusal (an abort with an HTTP status) as the error",
    lesson="tokenizer-manager",
    flags={"max_total_tokens": 128, "disaggregation_mode": "decode"},
    server=drive,
    look_at=look_at,
)
