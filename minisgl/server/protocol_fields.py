"""Which request fields minisgl takes, besides the ones it implements: the fields SGLang's router adds on the
way to a worker (accepted, no effect here), and the OpenAI or SGLang fields it knows but does not support
(refused with a 400 that names them). A field that is none of these is refused as OpenAI refuses it:
"Unrecognized request argument supplied: X" (RequestModel forbids extra fields; errors.py words the
message). The reference page lessons/docs/reference/http-api.md lists every field.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator


class RequestModel(BaseModel):
    """Base for what clients send: strict types so mistakes fail loudly, unknown fields refused."""

    model_config = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False)


# A refused field may still be sent with the value that asks for nothing (null, or the value that means
# "as without the field"), as generic clients do.
HARMLESS: dict[str, tuple[Any, ...]] = {
    "store": (False,),
    "tool_choice": ("none",),
    "tools": ([],),  # no tools (the ollama client sends an empty list)
    "modalities": (["text"],),
    "best_of": (1,),
    "return_hidden_states": (False,),
    "return_routed_experts": (False,),
    "no_stop_trim": (False,),
    "continue_final_message": (False,),
    "background": (False,),
    "no_logs": (False,),
    "return_bytes": (False,),
    "return_entropy": (False,),
}

def refuse_unsupported(cls: type, value: Any, info: ValidationInfo) -> Any:
    """The validator of every refused field: null (or its harmless value) passes, anything else is a 400."""
    if value is None or any(value == ok for ok in HARMLESS.get(info.field_name, ())):
        return value
    raise ValueError(f"minisgl does not support `{info.field_name}`; leave it out")


def refusing(*names: str) -> Any:
    """The validator a request model installs over its own list of refused fields."""
    return field_validator(*names, mode="before")(refuse_unsupported)


class RouterFields(RequestModel):
    """What SGLang's router (sgl-model-gateway) adds to a request on its way to a worker. The data-parallel
    rank is honoured (with --dp-size N, ranks 0 … N-1; serving_base.py checks the range and lets the
    X-Data-Parallel-Rank header win over the body); the bootstrap fields pair a request's halves on a prefill
    and a decode server (--disaggregation-mode, minisgl/disaggregation/); in mode null they have no effect."""

    bootstrap_host: str | None = None  # PD disaggregation: where the decode worker fetches the prefill's KV
    bootstrap_port: int | None = Field(default=None, ge=0, le=65535)
    bootstrap_room: int | None = Field(default=None, ge=0)  # the id pairing one prefill with one decode
    data_parallel_rank: int | None = None  # the router's --dp-aware mode picks the rank (the older name)
    routed_dp_rank: int | None = None  # the newer name the gateway sends
    # the prefill worker's rank, for the decode side
    disagg_prefill_dp_rank: int | None = Field(default=None, ge=0)


class GenerateRouterFields(RequestModel):
    """What SGLang's router adds to a native /generate body (it re-serializes the body with its own defaults).
    `model` is checked against the served model as on the OpenAI endpoints; `log_metrics` has no effect (the
    metrics count every request); the others are accepted only with the value that asks for nothing."""

    model: str | None = None
    log_metrics: bool = True
    background: Any = None
    no_logs: Any = None
    return_bytes: Any = None
    return_entropy: Any = None

    check_generate_router = refusing("background", "no_logs", "return_bytes", "return_entropy")


class SGLangUnsupportedFields(RequestModel):
    """SGLang's request extensions minisgl does not implement: known, so refused by name, not as unknown."""

    no_stop_trim: Any = None
    lora_path: Any = None
    lora_id: Any = None
    session_params: Any = None
    return_hidden_states: Any = None
    return_routed_experts: Any = None
    custom_logit_processor: Any = None
    custom_params: Any = None
    stop_regex: Any = None
    priority: Any = None

    check_sglang_unsupported = refusing(
        "no_stop_trim", "lora_path",
        "lora_id", "session_params", "return_hidden_states", "return_routed_experts",
        "custom_logit_processor", "custom_params", "stop_regex", "priority")
