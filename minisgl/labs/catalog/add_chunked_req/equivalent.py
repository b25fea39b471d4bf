"""Mutants of add_chunked_req that cannot change what it does (see minisgl/labs/mutants.py)."""

EQUIVALENT = {
    "PrefillAdder.add_chunked_req#17": "the result `_refuse` hands back is dropped on that line "
                                       "(add_chunked_req returns the request itself there): only the "
                                       "record's budget and decision reach the scheduler and the trace",
}
