"""Lab context_check (your file): what the scheduler does with a new request's lengths before it runs.

A request holds KV for its prompt and every token it produces, so prompt + output must fit max_req_len, the
smaller of the model's context length and the KV cache's slots. When a request arrives,
Scheduler.handle_generate_request (minisgl/scheduler/scheduler.py) asks your two functions:

    validate_input_length   may the prompt run at all? If not, why (the request is refused with that
                            message: the client's error, and the trace's sched.refused)
    clamp_max_new_tokens    how many tokens may it produce? (what was asked, or what still fits; the
                            scheduler logs a warning when it is less than what was asked)

Both are pure: numbers in, an answer out. The scheduler records what they decided (sched.refused with your
message, or sched.req_created with the max_new_tokens you gave).
"""

from __future__ import annotations


def validate_input_length(n: int, max_req_len: int, context_len: int, kv_slots: int) -> str | None:
    """Why a prompt of n tokens cannot run, or None when it can.

    A prompt needs at least one token, and room for at least one output token: n + 1 <= max_req_len.
    The messages, word for word (the trace and the client show them):
      n == 0:     "the prompt is empty: at least one input token is needed"
      too long:   "the prompt has {n} tokens, but at most {max_req_len - 1} fit: the limit is {max_req_len} "
                  "tokens (context length {context_len}, KV cache {kv_slots} slots) and one output token "
                  "needs room"
    """
    raise NotImplementedError("TODO: validate_input_length")


def clamp_max_new_tokens(n: int, asked: int | None, max_req_len: int) -> int:
    """How many tokens a prompt of n tokens (one that passed validate_input_length) may produce.

    asked is the request's max_new_tokens: None means "until the context is full", so everything that fits
    after the prompt. Otherwise what was asked, unless prompt and output together would not fit
    max_req_len: then what fits.
    """
    raise NotImplementedError("TODO: clamp_max_new_tokens")
