"""Change a number and run again: a scenario with some engine flags, request fields or prompts changed.

    minisgl scenario run chunked_prefill --set chunked_prefill_size=12
    minisgl scenario run shared_prefix --set R2.max_new_tokens=6 --prompt R2=" red green"

    from minisgl.scenarios import get
    from minisgl.scenarios.changes import change
    changed = change(get("chunked_prefill"), {"chunked_prefill_size": 12})

A key without a dot is an engine flag (a ServerArgs field: chunked_prefill_size, max_total_tokens,
max_running_requests, schedule_policy, ...). `RID.FIELD` changes one request of an engine scenario: when it
arrives (`after_round`), `max_new_tokens`, `stream`, or a sampling parameter (`ignore_eos`, `stop`, ...);
`RID.abort_after_round` moves its abort. A server scenario's requests are its client's code: only its
engine flags change. Everything else stays as the lesson ran it, so the two runs can be compared.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
from typing import Any

from minisgl.scenarios.base import Abort, Scenario, Submit
from minisgl.server_args import ServerArgs

REQUEST_FIELDS = ("after_round", "max_new_tokens", "stream")
SAMPLING_FIELDS = ("ignore_eos", "stop", "stop_token_ids", "temperature", "top_p", "top_k", "min_p", "seed",
                   "skip_special_tokens", "min_new_tokens")
FIXED_FLAGS = ("model", "dtype")  # every scenario runs the bundled model in float32: that is not a change


class ChangeError(ValueError):
    """A change that does not name a flag, a request or a field of this scenario."""


def parse_value(text: str) -> Any:
    """`12` -> 12, `0.5` -> 0.5, `true` -> True, `none` -> None, `["a"]` -> a list; else the text."""
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("none", "null"):
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def parse_pairs(items: list[str], what: str) -> dict[str, str]:
    """["KEY=VALUE", ...] -> {KEY: VALUE}, the value left as text; a clear error for a missing `=`."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ChangeError(f"{what} {item!r}: write it as KEY=VALUE")
        out[key.strip()] = value
    return out


def change(scenario: Scenario, sets: dict[str, Any] | None = None,
           prompts: dict[str, str] | None = None) -> Scenario:
    """The scenario with `sets` ({flag or RID.field: value}) and `prompts` ({RID: text}) applied."""
    sets, prompts = dict(sets or {}), dict(prompts or {})
    flags, steps = dict(scenario.flags), list(scenario.steps)
    fields = {f.name for f in dataclasses.fields(ServerArgs)}
    for key, value in sets.items():
        rid, dot, name = key.partition(".")
        if not dot:
            if key in FIXED_FLAGS or key not in fields:
                raise ChangeError(_unknown_flag(key, fields))
            flags[key] = _typed(key, value)
            continue
        steps = _change_request(scenario, steps, rid, name, value)
    for rid, text in prompts.items():
        steps = _change_request(scenario, steps, rid, "prompt", text)
    try:  # a value the engine refuses is refused here, not after the model has loaded
        ServerArgs(**{**scenario.engine_flags(), **flags}).validate()
    except ValueError as e:
        raise ChangeError(str(e)) from None
    told = [f"{k}={v!r}" for k, v in sets.items()] + [f"{r} prompt {t!r}" for r, t in prompts.items()]
    title = f"{scenario.title} (changed: {', '.join(told)})" if told else scenario.title
    return dataclasses.replace(scenario, flags=flags, steps=tuple(steps), title=title)


def _typed(key: str, value: Any) -> Any:
    """The value, if it has the type the flag's annotation names (`int | None`, `str`, `bool`, ...)."""
    kinds = {"int": int, "float": (int, float), "bool": bool, "str": str}
    annotation = str(next(f.type for f in dataclasses.fields(ServerArgs) if f.name == key))
    names = [part.strip() for part in annotation.split("|")]
    if value is None and "None" in names:
        return value
    for name in names:
        kind = kinds.get(name)
        if kind is not None and isinstance(value, kind) and not (name != "bool" and isinstance(value, bool)):
            return float(value) if name == "float" else value
    raise ChangeError(f"{key} takes {annotation}, not {value!r}")


def _unknown_flag(key: str, fields: set[str]) -> str:
    if key in FIXED_FLAGS:
        return f"{key} cannot be changed: every scenario runs the bundled model in float32"
    near = difflib.get_close_matches(key, sorted(fields), n=3)
    hint = f" (did you mean {', '.join(near)}?)" if near else ""
    return (f"no engine flag named {key!r}{hint}: a key without a dot is a ServerArgs field, "
            "RID.FIELD changes one request")


def _change_request(scenario: Scenario, steps: list, rid: str, name: str, value: Any) -> list:
    if scenario.server is not None:
        raise ChangeError(f"{scenario.name} drives a real server from its client's code: only its engine "
                          f"flags can be changed, not request {rid}'s {name}")
    rids = [s.rid for s in steps if isinstance(s, Submit)]
    if rid not in rids:
        raise ChangeError(f"{scenario.name} has no request {rid!r} (its requests: {', '.join(rids)})")
    if name == "abort_after_round":
        if not any(isinstance(s, Abort) and s.rid == rid for s in steps):
            raise ChangeError(f"{scenario.name} never aborts {rid}: there is no abort to move")
        return [dataclasses.replace(s, after_round=int(value)) if isinstance(s, Abort) and s.rid == rid else s
                for s in steps]
    return [_changed_submit(s, name, value) if isinstance(s, Submit) and s.rid == rid else s for s in steps]


def _changed_submit(s: Submit, name: str, value: Any) -> Submit:
    if name == "prompt":
        if s.ids is not None:
            raise ChangeError(f"{s.rid}'s prompt is given as token ids, which --prompt cannot change")
        return dataclasses.replace(s, **({"chat": value} if s.chat is not None else {"text": value}))
    if name in REQUEST_FIELDS:
        return dataclasses.replace(s, **{name: value})
    if name in SAMPLING_FIELDS:
        return dataclasses.replace(s, params={**s.params, name: value})
    raise ChangeError(f"{s.rid}.{name}: a request's field is one of {', '.join(REQUEST_FIELDS)}, "
                      f"abort_after_round, or a sampling parameter ({', '.join(SAMPLING_FIELDS)})")
