"""Mutants of the length check that cannot change what it does (see minisgl/labs/mutants.py)."""

EQUIVALENT = {
    "clamp_max_new_tokens#4": ("clamping an exact fit (n + asked == max_req_len) gives max_req_len - n, "
                               "which is what was asked: the answer is the same"),
}
