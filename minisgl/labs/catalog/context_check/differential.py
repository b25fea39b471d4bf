"""The context_check lab's differential check: your validate_input_length and clamp_max_new_tokens and the
engine's, asked about the same generated requests (a limit, the context length and KV slots behind it, a
prompt length from empty to past the limit, and a max_new_tokens that fits, fits exactly, overflows or is
not given). Every answer is compared, a refusal's message word for word."""

from __future__ import annotations

from hypothesis import strategies as st

from minisgl.labs.differential import Log, call

# (context length, KV slots, prompt length as an offset from the limit, max_new_tokens as an offset from
# what fits, or None)
CASE = st.tuples(st.integers(2, 64), st.integers(2, 64), st.integers(-4, 2),
                 st.one_of(st.none(), st.integers(-3, 3)))


def operations():
    return st.lists(CASE, min_size=1, max_size=6)


# always tried first: a prompt exactly one short of the limit, one at it, an empty one; an exact fit
EXAMPLES = [[(32, 64, -1, 0), (32, 64, 0, None), (8, 4, -8, 1)]]


def drive(ops, mine_ns, ref_ns, log: Log) -> None:
    for context_len, kv_slots, prompt_off, asked_off in ops:
        limit = min(context_len, kv_slots)
        n = max(0, limit + prompt_off)
        code = f"validate_input_length({n}, {limit}, {context_len}, {kv_slots})"
        why, _ = call(code, lambda: ref_ns.validate_input_length(n, limit, context_len, kv_slots),
                      lambda: mine_ns.validate_input_length(n, limit, context_len, kv_slots))
        log.step(code, why)
        if why is not None:
            continue
        asked = None if asked_off is None else max(1, limit - n + asked_off)
        code = f"clamp_max_new_tokens({n}, {asked}, {limit})"
        got, _ = call(code, lambda: ref_ns.clamp_max_new_tokens(n, asked, limit),
                      lambda: mine_ns.clamp_max_new_tokens(n, asked, limit))
        log.step(code, got)
