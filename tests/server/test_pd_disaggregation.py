"""Prefill/decode disaggregation behind SGLang's own router in its PD mode (sglang-router --pd-disaggregation).

The pair is the pd_disaggregation scenario's run, started once for the whole test session (the
`scenario_runs` fixture): `minisgl router --pd-disaggregation` with a float32 prefill server and a float32
decode server behind the real router, three /generate requests through it (the last one streamed), then
SIGTERM. Its answers equal the offline Engine's greedy text (tests/scenarios/test_facts.py); here: every KV
slot came back on both servers, the SIGTERM left no process of the router, the servers or their children
(the run fails otherwise), the merged trace checks, replays and draws one request across both servers, and a
lost byte in it is caught. Several requests at once on a pair, a chat, a client that leaves a stream and a
decode server asked alone are in test_pd_faults.py. Skipped, saying so, without .venv-router
(`make router-env`).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.server.conftest import replay_opens_to_the_end
from tracer.check import check_trace
from tracer.reader import load_trace
from tracer.servers import pick_server, server_view

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def ran(scenario_runs):
    return scenario_runs("pd_disaggregation")


def test_every_kv_slot_came_back_and_nothing_was_left_running(ran):
    # the launcher's children: each server's HTTP process, scheduler and detokenizer, and the router
    assert ran.outcome.server_processes >= 7
    for server, cached in (("decode", False), ("prefill", True)):
        (last,) = [ev for ev in server_view(ran.trace, server).events if ev.name == "sched.round_end"][-1:]
        total = ran.scenario.flags["max_total_tokens"]
        assert last.get("running") == last.get("waiting") == []
        # the decode server holds nothing; the prefill server's radix tree keeps the prompts
        assert last.get("free_slots") + last.get("cached_slots") == total
        assert (last.get("cached_slots") > 0) == cached, (server, last.attrs)


def test_the_merged_trace_checks_replays_and_draws_a_request_across_both(ran, tmp_path):
    merged = ran.trace
    assert check_trace(merged) == []
    for server in ("prefill", "decode"):
        assert check_trace(pick_server(merged, server)) == []
    sent = [ev for ev in merged.events if ev.name == "disagg.kv_sent"]
    received = {ev.get("room"): ev for ev in merged.events if ev.name == "disagg.kv_received"}
    assert len(sent) == len(received) == len(ran.outcome.results)
    assert all(ev.proc == "prefill/scheduler" for ev in sent)
    assert all(received[ev.get("room")].get("nbytes") == ev.get("nbytes") > 0 for ev in sent)

    _lifecycle_spans_both_servers(merged, sent[0].rid)
    replay_opens_to_the_end(pick_server(merged, "decode"))
    _a_lost_byte_is_caught(Path(ran.folder), tmp_path / "tampered")


def _lifecycle_spans_both_servers(merged, rid: str) -> None:
    from tracer.diagrams import render_diagram

    text = render_diagram(merged, "lifecycle", "mermaid", rid=rid)
    assert "participant prefill_S as prefill: Scheduler" in text
    assert "participant decode_S as decode: Scheduler" in text
    assert "prefill_S->>decode_S: KV rows + first token" in text


def _a_lost_byte_is_caught(merged: Path, tampered: Path) -> None:
    """The merged check compares each room's KV sent with the KV received: one byte fewer is a failure."""
    shutil.copytree(merged, tampered)
    done = False
    for path in sorted(tampered.glob("*.jsonl")):
        records = [json.loads(line) for line in path.read_text().splitlines()]
        for record in records:
            if record["name"] == "disagg.kv_received" and not done:
                record["attrs"]["nbytes"] -= 1
                done = True
        path.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert done
    failures = check_trace(load_trace(tampered))
    assert len(failures) == 1 and "nbytes sent" in failures[0], failures
