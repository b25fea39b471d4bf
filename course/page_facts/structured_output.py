"""Facts for lessons/structured-output.md: a grammar's compile (one round's wait, then cached), its mask per
round, a request ended by its grammar, a refused grammar; a tool call forced by a JSON schema; a reasoning
block split out by the serving layer."""

from __future__ import annotations

from course.page_facts.sampling_finishing import _one, _quote, _texts
from minisgl.reasoning_parser import ReasoningParser

SCENARIOS = ("structured_output", "tool_call")


def facts(traces) -> dict:
    return {**_grammar_facts(traces["structured_output"]), **_tool_facts(traces["tool_call"])}


def _grammar_facts(so) -> dict:
    """structured_output: JSON waits a round for its compile, AGAIN does not; the mask per round; YESNO ends
    on its grammar with ignore_eos; BAD is refused; GONE is aborted while compiling."""
    created = _one(so, "sched.req_created", "JSON")[0]
    ready = _one(so, "sched.grammar_ready", "JSON")[0]
    again = _one(so, "sched.grammar_ready", "AGAIN")[0]
    if ready.get("cached") or not again.get("cached") or ready.round != created.round + 1:
        raise ValueError("JSON should wait one round for its compile, AGAIN none")
    masks = [(ev.round, ev.get("allowed")[ev.rids.index("JSON")]) for ev in so.events
             if ev.name == "sched.grammar_masked" and "JSON" in ev.rids]
    fin = _one(so, "sched.finished", "JSON")[0]
    plain = {ev.round for ev in so.events if ev.name == "sched.batch_formed" and "PLAIN" in ev.rids}
    shared = min(r for r, _ in masks if r in plain)
    shared_mask = next(ev for ev in so.events if ev.name == "sched.grammar_masked" and ev.round == shared)
    yesno = _one(so, "sched.finished", "YESNO")[0]
    yesno_params = _one(so, "sched.req_created", "YESNO")[0].get("sampling_params")
    if yesno.get("finish_reason").get("type") != "stop" or not yesno_params.get("ignore_eos"):
        raise ValueError("YESNO should end on its grammar, with ignore_eos")
    return {
        "g_arrive_round": created.round,
        "g_ready_round": ready.round,
        "g_again_round": again.round,
        "g_first_allowed": masks[0][1],
        "g_first_text": _quote(_texts(so, "JSON")[0][1]),
        "g_allowed_all": ", ".join(str(n) for _, n in masks),
        "g_max_allowed": max(n for _, n in masks),
        "g_last_round": masks[-1][0],
        "g_finish_round": fin.round,
        "g_finish_type": fin.get("finish_reason").get("type"),
        "g_output_len": fin.get("output_len"),
        "g_shared_round": shared,
        "g_shared_rids": ", ".join(shared_mask.rids),
        "g_regex": _quote(yesno_params.get("regex")),
        "g_yesno_text": ", ".join(_quote(t) for _, t in _texts(so, "YESNO")),
        "g_yesno_len": yesno.get("output_len"),
        "g_yesno_max_new": yesno_params.get("max_new_tokens"),
        "g_bad_message": _one(so, "sched.refused", "BAD")[0].get("message"),
        "g_gone_where": _one(so, "sched.abort_requested", "GONE")[0].get("where"),
    }


def _tool_facts(tc) -> dict:
    """tool_call: the json_schema the serving layer made of the tools, and the JSON array written under it."""
    import json

    params = _one(tc, "sched.req_created", "TOOL")[0].get("sampling_params")
    schema = json.loads(params["json_schema"])
    names = [item["properties"]["name"]["enum"][0] for item in schema["items"]["anyOf"]]
    kept = _texts(tc, "TOOL")
    fin = _one(tc, "sched.finished", "TOOL")[0]
    text = "".join(t for _, t in kept[:-1]) if fin.get("finish_reason").get("type") == "stop" else ""
    calls = json.loads(text)  # raises if the forced answer is not a whole array: the page would be wrong
    masks = [ev.get("allowed")[0] for ev in tc.events if ev.name == "sched.grammar_masked"]
    thought = _texts(tc, "THINK")
    think_text = "".join(t for _, t in thought[:-1])  # its last token is the end of sequence
    reasoning, content = ReasoningParser("qwen3").parse_non_stream(think_text)
    return {
        "r_text": json.dumps(think_text),
        "r_reasoning": _quote(reasoning),
        "r_content": _quote(content),
        "t_names": ", ".join(f"`{n}`" for n in names),
        "t_min_items": schema["minItems"],
        "t_text": json.dumps(text),
        "t_call": f"`{calls[0]['name']}` with `{json.dumps(calls[0]['parameters'])}`",
        "t_output_len": fin.get("output_len"),
        "t_first_allowed": masks[0],
        "t_eos_text": _quote(kept[-1][1]),
    }
