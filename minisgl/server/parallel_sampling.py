"""n > 1: OpenAI's parallel sampling, as SGLang's TokenizerManager expands it. The request becomes n copies
(rids `<rid>-0` ... `<rid>-<n-1>`, a given seed made seed + i so the copies differ). Copy 0 runs alone until
its first token: by then its prompt is in the radix cache, so the other copies, sent next, find it there and
prefill only the prompt's last token (SGLang sends a prefill-only request first for the same reason).

`outputs` yields every copy's outputs as they come, tagged with the copy's index; a refusal or a dropped
client ends every copy (each one's generator aborts its request as it closes).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi.responses import JSONResponse, Response, StreamingResponse

from minisgl.server import tm_trace
from minisgl.server.errors import RequestError
from minisgl.server.protocol import GenerateReqInput, UsageInfo


def copies(obj: GenerateReqInput, n: int) -> list[GenerateReqInput]:
    seed = obj.sampling_params.get("seed")
    out = []
    for i in range(n):
        params = dict(obj.sampling_params) if seed is None else {**obj.sampling_params, "seed": seed + i}
        # copy 0 is streamed inside the server even when the client is not: its first token is the cue
        out.append(obj.model_copy(update={"rid": f"{obj.rid}-{i}", "sampling_params": params,
                                          "stream": obj.stream or i == 0}))
    return out


async def outputs(tokenizer_manager, objs: list[GenerateReqInput], raw_request, stream: bool
                  ) -> AsyncIterator[tuple[int, dict[str, Any]]]:
    """(copy index, output): every piece if `stream` (what the client asked), else each copy's last."""
    queue: asyncio.Queue = asyncio.Queue()
    done = object()

    async def run(i: int) -> None:
        try:
            async for out in tokenizer_manager.generate_request(objs[i], raw_request):
                await queue.put((i, out))
            await queue.put((i, done))
        except Exception as e:  # noqa: BLE001  (a RequestError, or any failure: the consumer must not wait)
            await queue.put((i, e))

    tasks = [asyncio.create_task(run(0))]
    running = 1
    try:
        while running:
            i, item = await queue.get()
            if isinstance(item, Exception):
                raise item
            if item is done:
                running -= 1
                continue
            if i == 0 and len(tasks) == 1:  # copy 0's first output: its prompt is cached, send the rest
                tasks += [asyncio.create_task(run(j)) for j in range(1, len(objs))]
                running += len(objs) - 1
            if not stream and item["meta_info"]["finish_reason"] is None:
                continue  # the client asked for one answer per copy: copy 0's pieces stay inside
            yield i, item
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def handle(serving, obj: GenerateReqInput, request: Any, raw_request, n: int,
                 router_request_id: str | None) -> Response:
    """The endpoint's answer with n choices: its own response (or chunks) per copy, each choice given its
    index; usage counts the prompt once and every copy's output."""
    objs = copies(obj, n)
    for o in objs:
        tm_trace.request_received(o.rid, serving.endpoint, serving.request_cls.__name__, request.stream,
                                  o.sampling_params, router_request_id)
    if request.stream:
        return StreamingResponse(_stream(serving, objs, request, raw_request),
                                 media_type=serving.stream_media_type)
    finals: dict[int, dict[str, Any]] = {}
    try:
        async for i, out in outputs(serving.tokenizer_manager, objs, raw_request, stream=False):
            finals[i] = out
    except RequestError as e:
        for o in objs:
            tm_trace.error(o.rid, e.status_code, e.message)
        raise
    response = serving._build_response(finals[0], request)
    response["choices"] = [{**serving._build_response(finals[i], request)["choices"][0], "index": i}
                           for i in range(n)]
    response["usage"] = _usage([finals[i]["meta_info"] for i in range(n)]).model_dump(mode="json")
    for i, o in enumerate(objs):
        tm_trace.response_finished(o.rid, finals[i]["meta_info"], 200)
    return JSONResponse(response)


def _usage(metas: list[dict[str, Any]]) -> UsageInfo:
    return UsageInfo.of(metas[0]["prompt_tokens"], sum(m["completion_tokens"] for m in metas),
                        metas[0]["cached_tokens"])


async def _stream(serving, objs: list[GenerateReqInput], request: Any, raw_request) -> AsyncIterator[str]:
    sent = [0] * len(objs)  # logprobs sent per copy
    seen: set[int] = set()
    metas: dict[int, dict[str, Any]] = {}
    index, usage_chunk = 0, None
    try:
        async for i, out in outputs(serving.tokenizer_manager, objs, raw_request, stream=True):
            first = i not in seen
            seen.add(i)
            out = {**out, "logprobs_from": sent[i]}
            sent[i] = len(out["meta_info"].get("output_token_logprobs", ()))
            for payload, delta in serving._stream_chunks(out, request, first=first):
                if not payload.get("choices"):  # a copy's usage chunk: one for all copies, at the end
                    usage_chunk = payload
                    continue
                for choice in payload["choices"]:
                    choice["index"] = i
                data = f"data: {json.dumps(payload, ensure_ascii=False)}\n\n"
                tm_trace.sse_chunk(objs[i].rid, index, delta, data)
                index += 1
                yield data
            if out["meta_info"]["finish_reason"] is not None:
                metas[i] = out["meta_info"]
                tm_trace.response_finished(objs[i].rid, out["meta_info"], 200)
        if usage_chunk is not None:
            usage_chunk["usage"] = _usage([metas[i] for i in range(len(objs))]).model_dump(mode="json")
            yield f"data: {json.dumps(usage_chunk, ensure_ascii=False)}\n\n"
    except RequestError as e:  # too late for a status line: the error goes into the stream
        for o in objs:
            tm_trace.error(o.rid, e.status_code, e.message)
        yield f"data: {e.to_response().model_dump_json()}\n\n"
    except (asyncio.CancelledError, GeneratorExit):
        for o in objs:
            tm_trace.error(o.rid, 499, "the client closed the connection")
        raise
    yield "data: [DONE]\n\n"
