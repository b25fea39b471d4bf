"""The facts each lesson page quotes from the traces: one module per page, named after it (`radix-cache.md` ->
radix_cache.py).

Each has `SCENARIOS` (the scenarios it reads) and `facts(traces) -> dict[str, value]`: every number or
word the page quotes from a trace, by name. `traces[name]` is that scenario's tracer.reader.Trace.
"""
