"""A request's states read off real scenario traces (tracer/req_states.py), as the scheduler-loop lesson
draws them."""

from __future__ import annotations

from tracer.req_states import START, state_diagram, transitions, union


def test_retraction_and_its_way_back(scenario_runs):
    found = transitions(scenario_runs("retract").trace)
    assert ("running", "retracted", "sched.retracted") in found
    assert ("retracted", "running", "sched.admission") in found
    assert (START, "waiting", "sched.req_created") in found
    assert ("running", "finished", "sched.finished") in found


def test_aborts_while_waiting_and_while_running(scenario_runs):
    found = transitions(scenario_runs("abort").trace)
    assert ("waiting", "aborted", "sched.abort_requested") in found
    assert ("running", "aborted", "sched.finished") in found


def test_a_chunked_prompt_and_a_refusal(scenario_runs):
    found = union({"chunked_prefill": scenario_runs("chunked_prefill").trace,
                   "context_limit": scenario_runs("context_limit").trace})
    assert found[("waiting", "chunked", "sched.admission")] == ["chunked_prefill"]
    assert found[("chunked", "running", "sched.admission")] == ["chunked_prefill"]
    assert found[(START, "aborted", "sched.refused")] == ["context_limit"]
    assert found[(START, "waiting", "sched.req_created")] == ["chunked_prefill", "context_limit"]
    # every state a request leaves is one it was seen to reach (or the start)
    reached = {START} | {b for _, b, _ in found}
    assert {a for a, _, _ in found} <= reached
    text = state_diagram(found)
    assert text.splitlines()[0] == "stateDiagram-v2"
    assert "    waiting --> chunked: sched.admission" in text and "    finished --> [*]" in text
