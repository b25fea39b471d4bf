"""The course builder: lesson pages whose every figure, table and number comes from a scenario trace.

    traces.py      run each scenario once per engine version and keep its trace (cached by source hash)
    facts.py       the named numbers a page may quote, computed from those traces
    lessons/       one module per lesson page: the facts that page quotes
    placeholders.py  `{{ fact ... }}`, `{{ figure ... }}`, `{{ events ... }}`, ... in a page's Markdown
    figures.py     the SVG and mermaid figures, drawn by the tracer's diagram views
    blocks.py      generated Markdown: event excerpts, batch-row tables, "try it" blocks
    mkdocs_hooks.py  wires all of it into `mkdocs build` (mkdocs.yml, at the repository root)

A page never types a slot, a position or a count; it names a fact, and the build fills it in.
"""
