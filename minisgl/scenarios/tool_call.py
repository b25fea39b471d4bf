"""A tool call forced by a grammar, and reasoning split out, through the real server (--reasoning-parser
qwen3). TOOL: a chat request with tools and tool_choice "required"; the serving layer turns the tools into a
JSON schema (an array of calls, each naming a tool and matching its parameters), the scheduler masks the
request's rows with it, and the answer's text, a JSON array, becomes the response's tool_calls. THINK: an
answer whose `<think>` block (forced by a regular expression: the bundled model was not trained to think)
the reasoning parser returns as reasoning_content, apart from the content."""

from __future__ import annotations

from minisgl.scenarios.base import Look, Scenario
from minisgl.scenarios.look import events, first

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12}},
                   "required": ["city"]}}}


THINKING = r"<think>\n[a-z ]{1,24}\n</think>\n\n(Yes|No)\."


def drive(url: str) -> dict:
    import httpx

    from minisgl.scenarios.http_client import wait_idle

    body = {"rid": "TOOL", "messages": [{"role": "user", "content": "What is the weather in Paris?"}],
            "tools": [WEATHER], "tool_choice": "required", "temperature": 0, "max_tokens": 60}
    out = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=300)
    if out.status_code != 200:
        raise RuntimeError(f"POST /v1/chat/completions answered {out.status_code}: {out.text[:500]}")
    wait_idle(url)
    think = {"rid": "THINK", "messages": [{"role": "user", "content": "Is the sea salty?"}], "temperature": 0,
             "max_tokens": 40, "regex": THINKING}
    thought = httpx.post(f"{url}/v1/chat/completions", json=think, timeout=300)
    if thought.status_code != 200:
        raise RuntimeError(f"POST /v1/chat/completions answered {thought.status_code}: {thought.text[:500]}")
    wait_idle(url)
    choice, message = out.json()["choices"][0], thought.json()["choices"][0]["message"]
    return {"TOOL": {"tool_calls": choice["message"]["tool_calls"], "finish_reason": choice["finish_reason"]},
            "THINK": {"reasoning_content": message["reasoning_content"], "content": message["content"]}}


def look_at(trace) -> Look:
    created = first(trace, "sched.req_created", lambda ev: ev.rid == "TOOL")
    text = "".join(ev.get("texts")[ev.rids.index("TOOL")] for ev in events(trace, "sched.sampled")
                   if "TOOL" in (ev.rids or ()))
    lines = [f"TOOL's grammar: json_schema {created.get('sampling_params', {}).get('json_schema')}",
             f"what the model wrote under it: {text!r}"] if created else ["TOOL never reached the scheduler"]
    return Look(lines, rid="TOOL")


SCENARIO = Scenario(
    name="tool_call",
    title="A tool call forced by its grammar, and reasoning split out",
    teaches="tool_choice required: the tools become a JSON schema, the rows are masked with it, the JSON "
    "array the model writes becomes tool_calls",
    lesson="structured-output",
    flags={"max_total_tokens": 256},
    server=drive,
    server_flags=("--reasoning-parser", "qwen3"),
    look_at=look_at,
)
