"""n > 1 (OpenAI's parallel sampling) and several prompts in one /v1/completions request, as SGLang's
TokenizerManager expands them: the request becomes one copy per prompt and choice (rids `<rid>-0`, `<rid>-1`,
..., choice i of prompt p at index p * n + i; a given seed made seed + i so the choices differ). Each
prompt's first copy runs alone until its first token: by then the prompt is in the radix cache, so that
prompt's other copies, sent next, find it there and prefill only its last token (SGLang sends a
prefill-only request first for the same reason).

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


def copies(objs: list[GenerateReqInput], n: int, rid: str) -> list[GenerateReqInput]:
    """n copies of each prompt's request, in the order of the answer's choices."""
    out = []
    for p, obj in enumerate(objs):
        seed = obj.sampling_params.get("seed")
        for i in range(n):
            params = dict(obj.sampling_params) if seed is None else {**obj.sampling_params, "seed": seed + i}
            # a prompt's first copy is streamed inside the server even when the client is not: its first
            # token is the cue for the others
            out.append(obj.model_copy(update={"rid": f"{rid}-{p * n + i}", "sampling_params": params,
                                              "stream": obj.stream or i == 0}))
    return out


async def outputs(tokenizer_manager, objs: list[GenerateReqInput], n: int, raw_request, stream: bool
                  ) -> AsyncIterator[tuple[int, dict[str, Any]]]:
    """(copy index, output): every piece if `stream` (what the client asked), else each copy's last. Copies
    come n per prompt."""
    queue: asyncio.Queue = asyncio.Queue()
    done = object()

    async def run(i: int) -> None:
        try:
            async for out in tokenizer_manager.generate_request(objs[i], raw_request):
                await queue.put((i, out))
            await queue.put((i, done))
        except Exception as e:  # noqa: BLE001  (a RequestError, or any failure: the consumer must not wait)
            await queue.put((i, e))

    tasks = [asyncio.create_task(run(first)) for first in range(0, len(objs), n)]
    running, started = len(tasks), set()
    try:
        while running:
            i, item = await queue.get()
            if isinstance(item, Exception):
                raise item
            if item is done:
                running -= 1
                continue
            if i % n == 0 and i not in started:  # a prompt's first output: it is cached, send its others
                started.add(i)
                tasks += [asyncio.create_task(run(j)) for j in range(i + 1, i + n)]
                running += n - 1
            if not stream and item["meta_info"]["finish_reason"] is None:
                continue  # the client asked for one answer per copy: copy 0's pieces stay inside
            yield i, item
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def handle(serving, objs: list[GenerateReqInput], requests: list[Any], raw_request, n: int,
                 router_request_id: str | None) -> Response:
    """The endpoint's answer with n choices per prompt (objs and requests: one per prompt): its own response
    (or chunks) per copy, each choice given its index; usage counts each prompt once and every output."""
    request = requests[0]
    # each copy's own request: its prompt (for echo), and a stream's per-request parsers (chat)
    per_copy = [r.model_copy() for r in requests for _ in range(n)]
    objs = copies(objs, n, objs[0].rid)
    for o in objs:
        tm_trace.request_received(o.rid, serving.endpoint, serving.request_cls.__name__, request.stream,
                                  o.sampling_params, router_request_id)
    if request.stream:
        return StreamingResponse(_stream(serving, objs, per_copy, n, raw_request),
                                 media_type=serving.stream_media_type)
    finals: dict[int, dict[str, Any]] = {}
    try:
        async for i, out in outputs(serving.tokenizer_manager, objs, n, raw_request, stream=False):
            finals[i] = out
    except RequestError as e:
        for o in objs:
            tm_trace.error(o.rid, e.status_code, e.message)
        raise
    built = [serving._build_response(finals[i], per_copy[i]) for i in range(len(objs))]
    response = built[0]  # the first copy's answer, with every copy's choice
    response["choices"] = [{**answer["choices"][0], "index": i} for i, answer in enumerate(built)]
    response["usage"] = _usage([finals[i]["meta_info"] for i in range(len(objs))], n).model_dump(mode="json")
    for i, o in enumerate(objs):
        tm_trace.response_finished(o.rid, finals[i]["meta_info"], 200)
    return JSONResponse(response)


def _usage(metas: list[dict[str, Any]], n: int) -> UsageInfo:
    """Each prompt counted once (its first copy's), every copy's output."""
    firsts = metas[::n]
    return UsageInfo.of(sum(m["prompt_tokens"] for m in firsts), sum(m["completion_tokens"] for m in metas),
                        sum(m["cached_tokens"] for m in firsts))


async def _stream(serving, objs: list[GenerateReqInput], requests: list[Any], n: int, raw_request
                  ) -> AsyncIterator[str]:
    sent = [0] * len(objs)  # logprobs sent per copy
    seen: set[int] = set()
    metas: dict[int, dict[str, Any]] = {}
    index, usage_chunk = 0, None
    try:
        async for i, out in outputs(serving.tokenizer_manager, objs, n, raw_request, stream=True):
            first = i not in seen
            seen.add(i)
            out = {**out, "logprobs_from": sent[i]}
            sent[i] = len(out["meta_info"].get("output_token_logprobs", ()))
            for payload, delta in serving._stream_chunks(out, requests[i], first=first):
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
            usage_chunk["usage"] = _usage([metas[i] for i in range(len(objs))], n).model_dump(mode="json")
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
