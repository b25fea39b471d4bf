"""Mutants of the FutureMap that cannot change what it does (see minisgl/labs/mutants.py)."""

_ZERO = ("an input id of 0 is then read from index 0 of the buffer, which is never handed out and never "
         "written, so it stays 0: the id comes back as 0 either way")
_DTYPE = ("a list of Python ints becomes an int64 tensor without the dtype too, and the buffer it is written "
          "into is int64 anyway")

EQUIVALENT = {
    "FutureMap.resolve_future_token_ids#7": _ZERO,  # input_ids <= 0
    "FutureMap.resolve_future_token_ids#8": _ZERO,  # input_ids < 1
    "FutureMap.resolve_future_token_ids#14": ("the clamp only keeps a real (positive) id from indexing the "
                                              "buffer out of range, and torch.where then keeps the real id; "
                                              "a placeholder's index is at least 1 already"),
    "FutureMap.store_to_future_map#3": _DTYPE,
    "FutureMap.store_to_future_map#5": _DTYPE,
}
