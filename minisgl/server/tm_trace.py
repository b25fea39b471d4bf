"""The TokenizerManager's trace events that the offline Engine emits too (it plays that part in-process)."""

from __future__ import annotations

from tracer.api import LEVEL_TOKENS, tracer


def tokenized(rid: str, text: str | None, input_ids: list[int], tokenizer) -> None:
    """tm.tokenized: the prompt after the chat template, its ids, and (level 2) each id's own text, so a
    trace reader can label prompt tokens without a tokenizer of its own."""
    if not tracer.enabled:
        return
    attrs = {}
    if tracer.level >= LEVEL_TOKENS:
        attrs["input_texts"] = [tokenizer.decode([t]) for t in input_ids]
    tracer.event("tm.tokenized", rid=rid, type="TokenizedGenerateReqInput", text=text, input_ids=input_ids,
                 **attrs)
