"""One-line bugs learners write in the context check (see minisgl/labs/bugs.py)."""

from minisgl.labs.bugs import Bug

BUGS = (
    Bug("empty_prompt_runs", "an empty prompt is not refused", "    if n == 0:\n", "    if n < 0:\n"),
    Bug("no_room_for_output", "a prompt as long as the limit runs, with no room for its one output token",
        "    if n >= max_req_len:\n", "    if n > max_req_len:\n"),
    Bug("one_token_short", "a prompt that leaves exactly one token of room is refused too",
        "    if n >= max_req_len:\n", "    if n >= max_req_len - 1:\n"),
    Bug("message_says_the_limit", "the message says the limit itself fits, not one less",
        "but at most {max_req_len - 1} fit", "but at most {max_req_len} fit"),
    Bug("message_limits_swapped", "the message gives the KV slots as the context length and back",
        "(context length {context_len}, KV cache {kv_slots} slots)",
        "(context length {kv_slots}, KV cache {context_len} slots)"),
    Bug("clamp_without_prompt", "the output alone is compared with the limit, the prompt forgotten",
        "if asked is None or n + asked > max_req_len:", "if asked is None or asked > max_req_len:"),
    Bug("clamp_one_short", "a clamped output leaves one token of the limit unused",
        "        return max_req_len - n\n", "        return max_req_len - n - 1\n"),
    Bug("clamp_to_the_limit", "a clamped output gets the whole limit, as if the prompt took no room",
        "        return max_req_len - n\n", "        return max_req_len\n"),
    Bug("none_means_one", "no max_new_tokens gives one token, not everything that fits",
        "if asked is None or n + asked > max_req_len:",
        "if asked is None:\n        return 1\n    if n + asked > max_req_len:"),
)
