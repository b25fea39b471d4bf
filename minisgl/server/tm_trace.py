"""The trace events of the main process: the HTTP server (`http.*`) and the TokenizerManager (`tm.*`).

This is that process's one tracing seam. Each hook returns at once when tracing is off, so the serving code
and the TokenizerManager call them without asking `tracer.enabled` first. The offline Engine plays the
TokenizerManager's part in-process and emits `tm.tokenized` through the same hook.
Event names and fields: lessons/docs/reference/trace-events.md.
"""

from __future__ import annotations

from typing import Any

from minisgl.server.protocol import UsageInfo
from tracer.api import LEVEL_TOKENS, tracer

worker_id: int | None = None  # in a tokenizer worker (--tokenizer-worker-num > 1): which one


def request_received(rid: str, endpoint: str, request_type: str, stream: bool, sampling_params: dict,
                     request_id: str | None = None) -> None:
    """request_id: the id a router in front gave this request (its x-request-id header), so one request can
    be followed from the router's log into this trace."""
    if not tracer.enabled:
        return
    if request_id is None and worker_id is None:
        tracer.event("http.request_received", rid=rid, endpoint=endpoint, stream=stream, type=request_type,
                     sampling_params=sampling_params)
    elif worker_id is None:
        tracer.event("http.request_received", rid=rid, endpoint=endpoint, stream=stream, type=request_type,
                     sampling_params=sampling_params, request_id=request_id)
    elif request_id is None:  # a tokenizer worker's (--tokenizer-worker-num > 1)
        tracer.event("http.request_received", rid=rid, endpoint=endpoint, stream=stream, type=request_type,
                     sampling_params=sampling_params, tokenizer_worker=worker_id)
    else:
        tracer.event("http.request_received", rid=rid, endpoint=endpoint, stream=stream, type=request_type,
                     sampling_params=sampling_params, request_id=request_id, tokenizer_worker=worker_id)


def generate_req_input(rid: str) -> None:
    if not tracer.enabled:
        return
    tracer.event("tm.generate_req_input", rid=rid, type="GenerateReqInput")


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


def waiter_woken(rid: str, delta_text: str, finished: bool) -> None:
    if not tracer.enabled:
        return
    tracer.event("tm.waiter_woken", rid=rid, delta_text=delta_text, finished=finished)


def sse_chunk(rid: str, index: int, delta: str, data: str) -> None:
    """http.sse_chunk (level 2): one `data:` line of a stream, the text it adds and its size on the wire."""
    if not (tracer.enabled and tracer.level >= LEVEL_TOKENS):
        return
    tracer.event("http.sse_chunk", rid=rid, type="SSE chunk", index=index, delta=delta,
                 bytes=len(data.encode()))


def response_finished(rid: str, meta_info: dict[str, Any], status: int) -> None:
    if not tracer.enabled:
        return
    usage = UsageInfo.of(meta_info["prompt_tokens"], meta_info["completion_tokens"],
                         meta_info["cached_tokens"])
    tracer.event("http.response_finished", rid=rid, finish_reason=meta_info["finish_reason"],
                 usage=usage.model_dump(), status=status)
    tracer.flush()


def error(rid: str | None, status: int, message: str) -> None:
    if not tracer.enabled:
        return
    tracer.event("http.error", rid=rid, status=status, message=message)
    tracer.flush()


def shutdown(signal_name: str, grace_s: float, running: list[str]) -> None:
    """tm.shutdown: a signal began the graceful shutdown; `rids` are the requests still running."""
    if not tracer.enabled:
        return
    tracer.event("tm.shutdown", rids=running, signal=signal_name, grace_s=grace_s)
    tracer.flush()


def shutdown_aborted(rid: str, grace_s: float) -> None:
    """tm.shutdown_aborted: `rid` outlasted the grace period; the server ends it (its client gets a 503)."""
    if not tracer.enabled:
        return
    tracer.event("tm.shutdown_aborted", rid=rid, grace_s=grace_s)
