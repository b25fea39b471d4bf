"""The HTTP server: the FastAPI app with its endpoints (`launch_server`, which runs the whole server around it,
is in server_lifecycle.py).

    main process         FastAPI + uvicorn, OpenAIServingChat / OpenAIServingCompletion, TokenizerManager
    scheduler process    ModelRunner + Scheduler.event_loop_normal          (minisgl/server/scheduler_process.py)
    detokenizer process  DetokenizerManager loop        (minisgl/detokenizer/detokenizer_process.py)
"""

from __future__ import annotations

import hmac
import json
import logging
from typing import Any

from fastapi import Depends, FastAPI
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request

from minisgl import __version__
from minisgl.server.errors import RequestError, server_shutting_down, server_unavailable
from minisgl.server.protocol import ModelCard, ModelList
from minisgl.server.serving_chat import OpenAIServingChat
from minisgl.server.serving_completions import OpenAIServingCompletion
from minisgl.server.serving_generate import ServingGenerate
from minisgl.server.tokenizer_manager import TokenizerManager

logger = logging.getLogger(__name__)



# ---- the app --------------------------------------------------------------------------------------
def create_app(tokenizer_manager: TokenizerManager, served_model_name: str, api_key: str | None,
               pids: dict[str, int | None]) -> FastAPI:
    app = FastAPI(title="minisgl", version=__version__)
    app.state.tokenizer_manager = tokenizer_manager
    app.state.openai_serving_chat = OpenAIServingChat(tokenizer_manager, served_model_name)
    app.state.openai_serving_completion = OpenAIServingCompletion(tokenizer_manager, served_model_name)
    app.state.serving_generate = ServingGenerate(tokenizer_manager, served_model_name)

    async def verify_api_key(request: Request) -> None:
        if api_key is None:
            return
        given = request.headers.get("authorization", "")
        if not hmac.compare_digest(given.encode(), f"Bearer {api_key}".encode()):
            raise RequestError("invalid or missing API key: send 'Authorization: Bearer <key>'", status_code=401,
                               code="invalid_api_key")

    auth = [Depends(verify_api_key)]

    @app.exception_handler(RequestError)
    async def request_error(request: Request, exc: RequestError) -> JSONResponse:
        return exc.to_json_response()

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        message = f"{request.method} {request.url.path}: {exc.detail}"
        return RequestError(message, status_code=exc.status_code).to_json_response()

    @app.exception_handler(Exception)
    async def internal_error(request: Request, exc: Exception) -> JSONResponse:
        logger.exception("%s %s failed", request.method, request.url.path)
        return RequestError(f"internal server error: {type(exc).__name__}: {exc}", status_code=500,
                            err_type="server_error").to_json_response()

    @app.post("/v1/chat/completions", dependencies=auth)
    async def openai_v1_chat_completions(raw_request: Request):
        return await raw_request.app.state.openai_serving_chat.handle_request(raw_request)

    @app.post("/v1/completions", dependencies=auth)
    async def openai_v1_completions(raw_request: Request):
        return await raw_request.app.state.openai_serving_completion.handle_request(raw_request)

    @app.post("/generate", dependencies=auth)
    async def generate_request(raw_request: Request):
        return await raw_request.app.state.serving_generate.handle_request(raw_request)

    @app.get("/v1/models", dependencies=auth)
    async def available_models() -> dict[str, Any]:
        card = ModelCard(id=served_model_name, root=served_model_name,
                         max_model_len=tokenizer_manager.limits.max_req_len)
        return ModelList(data=[card]).model_dump(mode="json")

    @app.get("/health")
    async def health() -> JSONResponse:
        """Alive, and how loaded: tests read KV use and queue lengths here (GetLoadReq to the scheduler)."""
        if tokenizer_manager.dead_reason is not None:
            return server_unavailable(tokenizer_manager.dead_reason).to_json_response()
        if tokenizer_manager.shutting_down:  # a load balancer's cue to send no more requests here
            return server_shutting_down().to_json_response()
        load = await tokenizer_manager.get_load()
        return JSONResponse({
            "status": "ok",
            "pids": pids,
            "num_pending_requests": len(tokenizer_manager.rid_to_state),  # waiters in this process
            "load": {"num_running_reqs": load.num_running_reqs, "num_waiting_reqs": load.num_waiting_reqs,
                     "free_slots": load.free_slots, "cached_slots": load.cached_slots,
                     "total_slots": load.total_slots},
        })

    @app.post("/flush_cache", dependencies=auth)
    async def flush_cache() -> JSONResponse:
        if not await tokenizer_manager.flush_cache():
            raise RequestError("the cache can only be flushed when no request is queued or running")
        return JSONResponse({"success": True, "message": "cache flushed"})

    @app.post("/abort_request", dependencies=auth)
    async def abort_request(raw_request: Request) -> JSONResponse:
        try:
            body = json.loads(await raw_request.body())
        except ValueError as e:
            raise RequestError(f"the body is not valid JSON: {e}") from None
        rid = body.get("rid") if isinstance(body, dict) else None
        if not isinstance(rid, str) or not rid:
            raise RequestError('the body must be {"rid": "<request id>"}', param="rid")
        return JSONResponse({"rid": rid, "found": tokenizer_manager.abort_request(rid)})

    return app
