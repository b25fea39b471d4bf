"""One module per lesson page, named after the page (`radix-cache.md` -> radix_cache.py).

Each has `SCENARIOS` (the scenarios it reads) and `facts(traces) -> dict[str, value]`: every number or
word the page quotes from a trace, by name. `traces[name]` is that scenario's tracer.reader.Trace.
"""
