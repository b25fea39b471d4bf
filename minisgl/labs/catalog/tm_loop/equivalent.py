"""Mutants of the TokenizerManager's loop that cannot change what it does for any request (see
minisgl/labs/mutants.py)."""

_UNKNOWN = ("only the arguments of the log line for a message of an unknown type change; the other "
            "processes send none, and logging never raises on a bad format (it reports it and goes on)")
_FAILED = ("only the arguments of the log line for a handler that raised change; the handlers do not raise "
           "on what the other processes send, and logging never raises on a bad format")

EQUIVALENT = {
    **{f"TokenizerManager.handle_loop#{n}": _UNKNOWN for n in (5, 6, 7, 8, 9, 10, 11)},
    **{f"TokenizerManager.handle_loop#{n}": _FAILED for n in (13, 14, 15, 16, 18)},
}
