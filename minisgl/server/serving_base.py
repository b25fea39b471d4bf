"""OpenAIServingBase.handle_request: the skeleton every generation endpoint shares.

    parse and validate the body -> _convert_to_internal_request (GenerateReqInput) -> stream or not

Both branches await the TokenizerManager's first output before answering: a request the engine refuses
still gets a 4xx status line and an OpenAI error body, never a 200 followed by a broken stream.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any, TypeVar

from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ValidationError
from starlette.background import BackgroundTask
from starlette.requests import Request

from minisgl.server import parallel_sampling, tm_trace
from minisgl.server.errors import RequestError, format_validation_error, model_not_found
from minisgl.server.protocol import GenerateReqInput, UsageInfo
from minisgl.server.tokenizer_manager import TokenizerManager

Chunk = tuple[dict[str, Any], str]  # one SSE payload, and the generated text it adds (for the trace)
M = TypeVar("M", bound=BaseModel)


class OpenAIServingBase:
    request_cls: type[BaseModel]
    endpoint: str
    stream_media_type = "text/event-stream"  # Ollama's endpoints stream newline-delimited JSON

    def __init__(self, tokenizer_manager: TokenizerManager, served_model_name: str):
        self.tokenizer_manager = tokenizer_manager
        self.served_model_name = served_model_name

    # ---- what each endpoint defines ---------------------------------------------------------------
    def _convert_to_internal_request(self, request: Any, rid: str) -> GenerateReqInput:
        raise NotImplementedError

    def _sampling_params(self, request: Any) -> dict[str, Any]:
        raise NotImplementedError

    def _stream_chunks(self, out: dict[str, Any], request: Any, first: bool) -> list[Chunk]:
        raise NotImplementedError

    def _build_response(self, out: dict[str, Any], request: Any) -> dict[str, Any]:
        raise NotImplementedError

    def _new_rid(self, request: Any) -> str:
        """The client's `rid` (SGLang's extension: scenarios and lessons name requests R1, R2), else the PD
        pairing room's (both halves of a disaggregated request share it, so the two servers' traces meet),
        else a fresh one."""
        return getattr(request, "rid", None) or self._room_rid(request) or uuid.uuid4().hex

    def _room_rid(self, request: Any) -> str | None:
        """On one half of a PD pair, `pd-<room>`; a server of its own ignores the router's room (two requests
        may carry the same one there, and would share a rid)."""
        return room_rid(request) if self.tokenizer_manager.disaggregation_mode != "null" else None

    def _split_prompts(self, request: Any) -> list[Any]:
        """One request per prompt: several only on /v1/completions, whose prompt may be a list of them."""
        return [request]

    def _validate_request(self, request: Any) -> None:
        model = getattr(request, "model", None)
        if model and model != self.served_model_name:
            raise model_not_found(model, self.served_model_name)

    # ---- the skeleton -----------------------------------------------------------------------------
    async def handle_request(self, raw_request: Request) -> Response:
        rid = traced = None  # traced: the rid the trace knows (none for n > 1: each copy is traced itself)
        try:
            request = await read_request(raw_request, self.request_cls, self.tokenizer_manager)
            rid = self._new_rid(request)
            n = getattr(request, "n", 1)
            requests = self._split_prompts(request)
            if n == 1 and len(requests) == 1:
                traced = rid
                tm_trace.request_received(rid, self.endpoint, self.request_cls.__name__, request.stream,
                                          self._sampling_params(request), router_request_id(raw_request))
            self._validate_request(request)
            objs = [self._convert_to_internal_request(r, rid) for r in requests]
            for obj in objs:
                obj.routed_dp_rank = extract_routed_dp_rank(request, raw_request,
                                                            self.tokenizer_manager.dp_size)
                for name in ("bootstrap_host", "bootstrap_port", "bootstrap_room"):  # PD's pairing
                    setattr(obj, name, getattr(request, name, None))
            if len(objs) > 1 or n > 1:
                return await parallel_sampling.handle(self, objs, requests, raw_request, n,
                                                      router_request_id(raw_request))
            obj = objs[0]
            if request.stream:
                return await self._handle_streaming_request(obj, request, raw_request)
            return await self._handle_non_streaming_request(obj, request, raw_request)
        except RequestError as e:
            tm_trace.error(traced, e.status_code, e.message)
            return self._error_response(e)

    def _error_response(self, e: RequestError) -> Response:
        """The error body: OpenAI's format (the Anthropic endpoint words it its way)."""
        return e.to_json_response()

    async def _handle_non_streaming_request(self, obj: GenerateReqInput, request: Any, raw_request: Request
                                            ) -> Response:
        generator = self.tokenizer_manager.generate_request(obj, raw_request)
        out = await generator.__anext__()
        await generator.aclose()
        response = self._build_response(out, request)
        tm_trace.response_finished(obj.rid, out["meta_info"], 200)
        return JSONResponse(response)

    async def _handle_streaming_request(self, obj: GenerateReqInput, request: Any, raw_request: Request
                                        ) -> Response:
        generator = self.tokenizer_manager.generate_request(obj, raw_request)
        first = await generator.__anext__()  # a refusal raises here, while the status can still be 400
        return StreamingResponse(
            self._generate_stream(first, generator, request, obj.rid), media_type=self.stream_media_type,
            # runs however the stream ended, a client disconnect included
            background=BackgroundTask(self.tokenizer_manager.abort_if_unfinished, obj.rid),
        )

    async def _generate_stream(self, first: dict[str, Any], generator: AsyncIterator[dict[str, Any]],
                               request: Any, rid: str) -> AsyncIterator[str]:
        index, out, logprobs_sent = 0, first, 0
        try:
            while True:
                is_first = out is first
                # meta_info holds every logprob so far: each chunk carries the ones not sent yet
                out = {**out, "logprobs_from": logprobs_sent}
                logprobs_sent = len(out["meta_info"].get("output_token_logprobs", ()))
                for payload, delta in self._stream_chunks(out, request, first=is_first):
                    data = f"data: {json.dumps(payload, ensure_ascii=False)}\n\n"
                    tm_trace.sse_chunk(rid, index, delta, data)
                    index += 1
                    yield data
                if out["meta_info"]["finish_reason"] is not None:
                    break
                out = await generator.__anext__()
            tm_trace.response_finished(rid, out["meta_info"], 200)
        except RequestError as e:  # too late for a status line: the error goes into the stream
            tm_trace.error(rid, e.status_code, e.message)
            yield f"data: {e.to_response().model_dump_json()}\n\n"
        except (asyncio.CancelledError, GeneratorExit):  # the client left mid-stream
            tm_trace.error(rid, 499, "the client closed the connection")
            raise
        finally:
            await generator.aclose()
        yield "data: [DONE]\n\n"


# ---- helpers the endpoints share ------------------------------------------------------------------
# The headers SGLang's router (sgl-model-gateway) takes its request id from and passes on to the worker: a
# client's x-request-id (or x-correlation-id) is the `request_id` in the router's log and reaches us
# unchanged.
REQUEST_ID_HEADERS = ("x-request-id", "x-correlation-id")
MAX_REQUEST_ID_CHARS = 256


def router_request_id(raw_request: Request) -> str | None:
    """The request id a router (or the client) sent in a header, for the trace; None without one."""
    for header in REQUEST_ID_HEADERS:
        value = raw_request.headers.get(header)
        if value:
            return value[:MAX_REQUEST_ID_CHARS]
    return None


OFF_LOOP_PARSE_BYTES = 64 * 1024  # bodies from here on are parsed on the tokenizer thread


def parse_request(request_cls: type[M], body: bytes) -> M:
    """The body as `request_cls`, or a 400 naming the first bad field. Bad JSON of any kind (nesting too
    deep, a lone surrogate escape, invalid UTF-8) is a ValidationError too: pydantic-core's parser has its
    own depth limit, so no RecursionError can escape."""
    try:
        return request_cls.model_validate_json(body)
    except ValidationError as e:
        err = format_validation_error(e).error
        raise RequestError(err.message, param=err.param) from None


async def read_request(raw_request: Request, request_cls: type[M], tokenizer_manager: TokenizerManager) -> M:
    """Read and parse the body; a large one (up to --max-request-body-bytes) on the tokenizer thread, in
    turn with the prompts tokenized there. That frees the event loop only in part: pydantic-core holds the
    GIL while it parses (about 6 ms per MB), so the body limit is what bounds that pause."""
    body = await raw_request.body()
    if len(body) < OFF_LOOP_PARSE_BYTES:
        return parse_request(request_cls, body)
    return await tokenizer_manager.run_in_tokenizer_thread(parse_request, request_cls, body)


DP_RANK_HEADER = "x-data-parallel-rank"  # SGLang's X-Data-Parallel-Rank (HTTP header names ignore case)


def room_rid(request: Any) -> str | None:
    """`pd-<room>` for a request the router sent to a prefill/decode pair (bootstrap_room), else None."""
    room = getattr(request, "bootstrap_room", None)
    return None if room is None else f"pd-{room}"


def extract_routed_dp_rank(request: Any, raw_request: Request, dp_size: int) -> int | None:
    """The data-parallel rank the client chose: SGLang's X-Data-Parallel-Rank header before the body's
    routed_dp_rank (or its older name data_parallel_rank); None lets the DataParallelController pick.
    A rank outside 0 … dp_size-1, or a header that is not an integer, is a 400."""
    header = raw_request.headers.get(DP_RANK_HEADER)
    if header is not None:
        try:
            rank, param = int(header), None
        except ValueError:
            raise RequestError("the X-Data-Parallel-Rank header must be an integer, not "
                               f"{header!r}") from None
    elif getattr(request, "routed_dp_rank", None) is not None:
        rank, param = request.routed_dp_rank, "routed_dp_rank"
    else:
        rank, param = getattr(request, "data_parallel_rank", None), "data_parallel_rank"
    if rank is None or 0 <= rank < dp_size:
        return rank
    where = "the X-Data-Parallel-Rank header" if param is None else f"`{param}`"
    ranks = ("one data-parallel rank (0)" if dp_size == 1
             else f"{dp_size} data-parallel ranks (0 to {dp_size - 1})")
    raise RequestError(f"{where} asks for rank {rank}, but this server runs {ranks}, so rank {rank} does not "
                       f"exist", param=param)


def finish_reason_of(meta: dict[str, Any]) -> str | None:
    reason = meta["finish_reason"]
    return None if reason is None else reason["type"]


def matched_stop_of(meta: dict[str, Any]) -> int | str | None:
    reason = meta["finish_reason"]
    return reason.get("matched") if reason else None


def usage_of(meta: dict[str, Any]) -> UsageInfo:
    return UsageInfo.of(meta["prompt_tokens"], meta["completion_tokens"], meta["cached_tokens"])


def with_warning(data: dict[str, Any], meta: dict[str, Any]) -> dict[str, Any]:
    """Add the engine's warning (e.g. max_tokens clamped to the context) to a response or its last chunk.
    Not an OpenAI field: clients that do not know it ignore it (the openai client keeps it in model_extra)."""
    if meta.get("warning"):
        data["warning"] = meta["warning"]
    return data


def dump_chunk(chunk: BaseModel) -> dict[str, Any]:
    """A stream chunk as OpenAI sends it: no `usage` key until the usage chunk, no null fields in a delta."""
    data = chunk.model_dump(mode="json")
    if data.get("usage") is None:
        data.pop("usage", None)
    for choice in data.get("choices", []):
        if "delta" in choice:
            choice["delta"] = {k: v for k, v in choice["delta"].items() if v is not None}
    return data
