"""Ollama's API (/api/chat, /api/generate, /api/tags), the subset minisgl serves, with SGLang's names
(sglang/srt/entrypoints/ollama/protocol.py). `options` maps onto the sampling params (num_predict is
max_new_tokens); Ollama's runtime knobs (num_ctx, num_thread, ...) are accepted and change nothing here;
`format` ("json" or a JSON schema) is structured output. Tools, thinking and images are refused by name."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import Field, field_validator

from minisgl.server.protocol_fields import RequestModel, refusing

# options this server maps onto its sampling params (Ollama's name -> SGLang's)
SAMPLING_OPTIONS = {"num_predict": "max_new_tokens", "temperature": "temperature", "top_p": "top_p",
                    "top_k": "top_k", "min_p": "min_p", "seed": "seed", "stop": "stop",
                    "repeat_penalty": "repetition_penalty", "presence_penalty": "presence_penalty",
                    "frequency_penalty": "frequency_penalty"}
# options that would change the answer but have no counterpart here: refused unless neutral
NEUTRAL_OPTIONS = {"typical_p": 1.0, "mirostat": 0, "tfs_z": 1.0}


class OllamaMessage(RequestModel):
    role: Literal["system", "user", "assistant"]
    content: str
    images: Any = None
    tool_calls: Any = None
    thinking: Any = None

    check_unsupported = refusing("images", "tool_calls", "thinking")


class OllamaRequest(RequestModel):
    """What /api/chat and /api/generate share."""

    model: str = Field(min_length=1)
    stream: bool = True  # Ollama streams unless told not to
    format: Literal["", "json"] | dict[str, Any] | None = None
    options: dict[str, Any] | None = None
    keep_alive: float | str | None = None  # accepted: the model stays loaded while the server runs
    think: Any = None
    logprobs: Any = None
    top_logprobs: Any = None

    check_unsupported = refusing("think", "logprobs", "top_logprobs")

    @field_validator("options")
    @classmethod
    def _options_we_can_honour(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        for name, neutral in (value or {}).items():
            if name in NEUTRAL_OPTIONS and neutral != NEUTRAL_OPTIONS[name]:
                raise ValueError(f"minisgl does not support the option {name!r}; leave it out")
        return value

    def sampling_params(self) -> dict[str, Any]:
        options = self.options or {}
        params = {ours: options[theirs] for theirs, ours in SAMPLING_OPTIONS.items()
                  if options.get(theirs) is not None}
        if params.get("max_new_tokens", 0) < 0:  # Ollama's -1 (or -2): until the context is full
            params["max_new_tokens"] = None
        params.setdefault("max_new_tokens", None)
        if self.format == "json":
            params["json_schema"] = '{"type": "object"}'
        elif isinstance(self.format, dict):
            params["json_schema"] = json.dumps(self.format)
        return params


class OllamaChatRequest(OllamaRequest):
    messages: list[OllamaMessage] = Field(min_length=1)
    tools: Any = None

    check_chat_unsupported = refusing("tools")


class OllamaGenerateRequest(OllamaRequest):
    prompt: str = ""
    system: str | None = None
    raw: bool = False  # true: the prompt as it is, without the chat template
    suffix: Any = None
    template: Any = None
    context: Any = None
    images: Any = None

    check_generate_unsupported = refusing("suffix", "template", "context", "images")
