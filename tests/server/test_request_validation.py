"""The server's length checks (request_validation.py): SGLang's messages for a prompt longer than the context
and for prompt + max_new_tokens past it, this server's own for a KV pool smaller than the context, and
--allow-auto-truncate's shortening. The clamp the scheduler makes when only the KV pool is short is reported
as a warning (the offline Engine: the same TokenizerManagerCore)."""

from __future__ import annotations

import pytest

from minisgl.scheduler.io_struct import TokenizedGenerateReqInput
from minisgl.server.errors import RequestError
from minisgl.server.request_validation import validate_one_request
from minisgl.server.tokenizer_manager import EngineLimits

LIMITS = EngineLimits(max_req_len=32, max_total_num_tokens=64, context_len=32, vocab_size=49152)
SMALL_POOL = EngineLimits(max_req_len=24, max_total_num_tokens=24, context_len=32, vocab_size=49152)


def _req(n: int, max_new_tokens: int | None = None) -> TokenizedGenerateReqInput:
    params = {} if max_new_tokens is None else {"max_new_tokens": max_new_tokens}
    return TokenizedGenerateReqInput(rid="r", input_text=None, input_ids=list(range(1, n + 1)),
                                     sampling_params=params)


def _refusal(req, limits=LIMITS) -> RequestError:
    with pytest.raises(RequestError) as refused:
        validate_one_request(req, limits)
    assert refused.value.status_code == 400
    return refused.value


def test_what_fits_passes_untouched():
    for n, asked in ((31, 1), (1, 31), (10, None), (31, None)):
        req = _req(n, asked)
        validate_one_request(req, LIMITS)
        assert len(req.input_ids) == n and req.sampling_params.get("max_new_tokens") == asked


def test_sglang_messages_for_the_context():
    assert _refusal(_req(32)).message == "The input (32 tokens) is longer than the model's context length (32 tokens)."
    error = _refusal(_req(10, 23))
    assert error.code == "context_length_exceeded"
    assert error.message.startswith("Requested token count exceeds the model's maximum context length of 32 "
                                    "tokens. You requested a total of 33 tokens: 10 tokens from the input "
                                    "messages and 23 tokens for the completion.")
    assert "empty" in _refusal(_req(0)).message


def test_a_kv_pool_smaller_than_the_context_names_both():
    error = _refusal(_req(24), SMALL_POOL)
    assert error.message.startswith("the prompt has 24 tokens, but at most 23 fit")
    assert "context length 32, KV cache 24 slots" in error.message
    req = _req(10, 20)  # fits the context, not the pool: the scheduler clamps it (below)
    validate_one_request(req, SMALL_POOL)
    assert req.sampling_params["max_new_tokens"] == 20


def test_allow_auto_truncate_shortens_instead():
    long = _req(40, 20)
    validate_one_request(long, SMALL_POOL, allow_auto_truncate=True)
    assert long.input_ids == list(range(1, 24)), "the prompt keeps its first max_req_len - 1 tokens"
    assert long.sampling_params["max_new_tokens"] == 9, "and its output what the context leaves"
    wide = _req(10, 100)
    validate_one_request(wide, LIMITS, allow_auto_truncate=True)
    assert wide.input_ids == list(range(1, 11)) and wide.sampling_params["max_new_tokens"] == 22


def test_the_schedulers_clamp_comes_back_as_a_warning(base_engine):
    engine = base_engine.fork(max_total_tokens=48, context_length=1024)
    out = engine.generate(input_ids=list(range(1000, 1040)),
                          sampling_params={"max_new_tokens": 20, "temperature": 0, "ignore_eos": True})
    assert out["usage"]["completion_tokens"] == 8
    assert out["warning"] == ("max_new_tokens 20 was clamped to 8: the prompt's 40 tokens plus the output must "
                              "fit the context")
