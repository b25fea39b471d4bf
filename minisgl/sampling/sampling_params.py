"""Per-request sampling settings, checked once at the API boundary so the sampler can trust them."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any, NoReturn

MAX_STOP_STRS = 16
MAX_SEED = 2**63
GRAMMAR_KEYS = ("json_schema", "regex", "ebnf")  # a structured-output grammar: at most one per request
# the penalties (sampling/penaltylib.py) and their neutral values: a field at its neutral value is left out of
# to_dict, so a trace without penalties reads as before they existed
PENALTY_DEFAULTS = {"frequency_penalty": 0.0, "presence_penalty": 0.0, "repetition_penalty": 1.0,
                    "min_new_tokens": 0}


def _is_int(x: Any) -> bool:
    """bool is a subclass of int; a JSON `true` must not pass as top_k=1."""
    return isinstance(x, int) and not isinstance(x, bool)


def _is_real(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


@dataclass
class SamplingParams:
    """How one request picks its next tokens and when it stops; same field names as SGLang."""

    max_new_tokens: int | None = 128  # None: until the context is full (the OpenAI endpoints' default)
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    min_p: float = 0.0
    seed: int | None = None
    stop: str | list[str] | None = None
    stop_token_ids: list[int] | None = None
    ignore_eos: bool = False
    skip_special_tokens: bool = True
    # penalties (sampling/penaltylib.py), SGLang's names: OpenAI's two, the repetition penalty of transformers
    # (a seen token's logit divided by it if positive, multiplied if negative), and no stop token before
    # min_new_tokens
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    repetition_penalty: float = 1.0
    min_new_tokens: int = 0
    # structured output (constrained/): the output must match this JSON schema, regular expression or EBNF
    json_schema: str | None = None
    regex: str | None = None
    ebnf: str | None = None
    stop_strs: list[str] = field(default_factory=list, init=False, repr=False, compare=False)

    def verify(self) -> None:
        """Raise ValueError naming the field, its value and the allowed range on the first bad field."""
        if self.max_new_tokens is not None and (not _is_int(self.max_new_tokens) or self.max_new_tokens < 1):
            _bad("max_new_tokens", self.max_new_tokens, "null (up to the context length) or an integer >= 1")
        if not _is_real(self.temperature) or not math.isfinite(self.temperature) or self.temperature < 0:
            _bad("temperature", self.temperature, "a finite number >= 0 (0 means greedy)")
        if not _is_real(self.top_p) or not 0 < self.top_p <= 1:
            _bad("top_p", self.top_p, "a number in (0, 1]")
        if not _is_int(self.top_k) or not (self.top_k == -1 or self.top_k >= 1):
            _bad("top_k", self.top_k, "-1 (disabled) or an integer >= 1")
        if not _is_real(self.min_p) or not 0 <= self.min_p <= 1:
            _bad("min_p", self.min_p, "a number in [0, 1]")
        if self.seed is not None and (not _is_int(self.seed) or not 0 <= self.seed < MAX_SEED):
            _bad("seed", self.seed, "null or an integer in [0, 2**63)")
        self._verify_stop()
        if self.stop_token_ids is not None:
            if not isinstance(self.stop_token_ids, (list, tuple, set)):
                _bad("stop_token_ids", self.stop_token_ids, "null or a list of integers >= 0")
            for t in self.stop_token_ids:
                if not _is_int(t) or t < 0:
                    _bad("stop_token_ids", self.stop_token_ids, "null or a list of integers >= 0")
        for name in ("ignore_eos", "skip_special_tokens"):
            if not isinstance(getattr(self, name), bool):
                _bad(name, getattr(self, name), "true or false")
        for name in ("frequency_penalty", "presence_penalty"):
            value = getattr(self, name)
            if not _is_real(value) or not -2 <= value <= 2:
                _bad(name, value, "a number in [-2, 2]")
        if not _is_real(self.repetition_penalty) or not 0 < self.repetition_penalty <= 2:
            _bad("repetition_penalty", self.repetition_penalty, "a number in (0, 2]")
        if not _is_int(self.min_new_tokens) or self.min_new_tokens < 0:
            _bad("min_new_tokens", self.min_new_tokens, "an integer >= 0")
        given = [name for name in GRAMMAR_KEYS if getattr(self, name) is not None]
        for name in given:
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                _bad(name, getattr(self, name), "null or a non-empty string")
        if len(given) > 1:
            raise ValueError(f"sampling_params: {' and '.join(given)} are both set; a request takes at most "
                             "one of json_schema, regex and ebnf")

    @property
    def has_penalties(self) -> bool:
        return any(getattr(self, name) != neutral for name, neutral in PENALTY_DEFAULTS.items())

    def grammar_key(self) -> tuple[str, str] | None:
        """(kind, text) of the request's grammar, or None."""
        return next(((name, getattr(self, name)) for name in GRAMMAR_KEYS if getattr(self, name) is not None),
                    None)

    def _verify_stop(self) -> None:
        stop = self.stop
        if stop is None:
            return
        strs = [stop] if isinstance(stop, str) else stop
        if not isinstance(strs, (list, tuple)):
            _bad("stop", stop, "null, a string, or a list of strings")
        if len(strs) > MAX_STOP_STRS:
            _bad("stop", stop, f"at most {MAX_STOP_STRS} strings")
        for s in strs:
            if not isinstance(s, str) or not s:
                _bad("stop", stop, "non-empty strings")

    def normalize(self) -> None:
        """Give the detokenizer one list of stop strings and the scheduler an O(1) stop-id lookup."""
        if self.stop is None:
            self.stop_strs = []
        elif isinstance(self.stop, str):
            self.stop_strs = [self.stop]
        else:
            self.stop_strs = list(self.stop)
        self.stop_token_ids = set(self.stop_token_ids) if self.stop_token_ids else set()

    @property
    def is_greedy(self) -> bool:
        """Both settings leave exactly one candidate, so the sampler can take a plain argmax."""
        return self.temperature == 0 or self.top_k == 1

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SamplingParams:
        """Reject typos like `max_tokens` loudly instead of silently using a default."""
        if not isinstance(d, dict):
            raise ValueError(f"sampling_params must be an object, got {type(d).__name__}")
        known = _field_names()
        unknown = sorted(set(d) - set(known))
        if unknown:
            raise ValueError(f"unknown sampling_params key(s) {unknown}; known keys are {known}")
        return cls(**d)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready copies: a normalized set of stop ids comes back as a sorted list."""
        out = {name: getattr(self, name) for name in _field_names()
               if not (name in GRAMMAR_KEYS and getattr(self, name) is None)
               and not (name in PENALTY_DEFAULTS and getattr(self, name) == PENALTY_DEFAULTS[name])}
        for key in ("stop", "stop_token_ids"):
            value = out[key]
            if isinstance(value, set):
                out[key] = sorted(value)
            elif isinstance(value, (list, tuple)):
                out[key] = list(value)
        return out


def _field_names() -> list[str]:
    return [f.name for f in fields(SamplingParams) if f.init]


def _bad(name: str, value: Any, allowed: str) -> NoReturn:
    raise ValueError(f"sampling_params.{name} = {value!r} is invalid: must be {allowed}")
