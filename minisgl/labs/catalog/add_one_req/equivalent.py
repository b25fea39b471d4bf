"""Mutants of add_one_req that cannot change what it does (see minisgl/labs/mutants.py)."""

EQUIVALENT = {
    "PrefillAdder.add_one_req#81": "`chunked=None` reads as false like `chunked=False`: _admit only tests it "
                                   "(`\"chunked\" if chunked else \"admitted\"`)",
}
