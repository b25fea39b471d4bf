"""Mutants of prepare_for_decode and retract_decode that cannot change what they do (see
minisgl/labs/mutants.py)."""

_MESSAGE = ("only the text of the error for a pool too small for one request's next token changes; the "
            "scheduler refuses a request that could not fit before it runs, so the error is never raised")

EQUIVALENT = {f"ScheduleBatch.retract_decode#{n}": _MESSAGE for n in (12, 13, 14, 15)}
