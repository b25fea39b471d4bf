"""The detokenizer's trace event, kept out of the decoding code (incremental.py knows nothing of tracing).

DetokenizerManager calls `decoded` once per BatchTokenIDOutput, in the detokenizer process and in the
offline Engine alike. The hook returns at once unless the trace records tokens (level 2).
Event names and fields: lessons/docs/reference/trace-events.md.
"""

from __future__ import annotations

from collections.abc import Sequence

from minisgl.detokenizer.incremental import DecodeStep
from minisgl.scheduler.io_struct import BatchTokenIDOutput
from tracer.api import LEVEL_TOKENS, tracer


def decoded(recv: BatchTokenIDOutput, steps: Sequence[DecodeStep]) -> None:
    """detok.decoded per rid: the ids in, the text out, and what was held back and why."""
    if not (tracer.enabled and tracer.level >= LEVEL_TOKENS):
        return
    for rid, ids, step in zip(recv.rids, recv.output_ids, steps):
        tracer.event("detok.decoded", rid=rid, type="BatchStrOutput", token_ids=list(ids),
                     delta=step.delta_text, read_offset=step.read_offset, surr_offset=step.surr_offset,
                     held_back_tokens=step.held_back.incomplete_tokens,
                     stop_prefix=step.held_back.stop_prefix, stop_trimmed=step.stop_trimmed)
