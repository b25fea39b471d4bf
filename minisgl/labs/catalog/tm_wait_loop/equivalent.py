"""Mutants of the TokenizerManager's loop that cannot change what it does for any request (see
minisgl/labs/mutants.py)."""

_UNKNOWN = ("only the arguments of the log line for a message of an unknown type change; the other "
            "processes send none, and logging never raises on a bad format (it reports it and goes on)")
_FAILED = ("only the arguments of the log line for a handler that raised change; the handlers do not raise "
           "on what the other processes send, and logging never raises on a bad format")

_RESCUED = ("the waiter aborts no request (a rid of None is not filed), but generate_request's "
            "`finally` does: the state is still filed when the 499 is raised, so the same AbortReq goes out "
            "before the error, as it would have (the unit tests call the waiter alone, without that "
            "`finally`, and catch it)")

_LAST_WAKE = ("`continue` -> `break` for a waiter without stream that is woken before its finish: "
              "the scheduler sends such a request nothing before it finishes (stream_output), so its first "
              "wake is its last (the unit tests file pieces by hand, and catch it)")

EQUIVALENT = {
    "TokenizerManager._wait_one_response#8": _RESCUED,
    "TokenizerManager._wait_one_response#18": _LAST_WAKE,
    **{f"TokenizerManager.handle_loop#{n}": _UNKNOWN for n in (5, 6, 7, 8, 9, 10, 11)},
    **{f"TokenizerManager.handle_loop#{n}": _FAILED for n in (12, 13, 14, 15, 16, 17, 18)},
}
