"""The HTTP server: the FastAPI app with its endpoints (`launch_server`, which runs the whole server around
it, is in server_lifecycle.py).

    main process         FastAPI + uvicorn, OpenAIServingChat / OpenAIServingCompletion, TokenizerManager
    scheduler process    ModelRunner + Scheduler.event_loop             (minisgl/server/scheduler_process.py)
    detokenizer process  DetokenizerManager loop        (minisgl/detokenizer/detokenizer_process.py)
"""

from __future__ import annotations

import hmac
import logging
from typing import Any

from fastapi import Depends, FastAPI
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request

from minisgl import __version__
from minisgl.server.errors import RequestError, model_not_found, server_shutting_down, server_unavailable
from minisgl.server.http_guards import install_guards, require_json, require_json_if_body
from minisgl.server.http_server_args import DEFAULT_MAX_REQUEST_BODY_BYTES
from minisgl.server.protocol import (
    AbortReqInput,
    FlushCacheReqInput,
    ModelCard,
    ModelList,
    PauseGenerationInput,
)
from minisgl.server.router_endpoints import WorkerInfo, add_router_routes
from minisgl.server.serving_anthropic import AnthropicServing
from minisgl.server.serving_base import read_request
from minisgl.server.serving_chat import OpenAIServingChat
from minisgl.server.serving_completions import OpenAIServingCompletion
from minisgl.server.serving_generate import ServingGenerate
from minisgl.server.serving_ollama import OllamaServingChat, OllamaServingGenerate, now
from minisgl.server.tokenizer_manager import TokenizerManager

logger = logging.getLogger(__name__)



# ---- the app --------------------------------------------------------------------------------------
def create_app(tokenizer_manager: TokenizerManager, served_model_name: str, api_key: str | None,
               pids: dict[str, int | None], max_request_body_bytes: int = DEFAULT_MAX_REQUEST_BODY_BYTES,
               allowed_origins: list[str] | None = None, worker_info: WorkerInfo | None = None) -> FastAPI:
    app = FastAPI(title="minisgl", version=__version__)
    install_guards(app, max_request_body_bytes, allowed_origins)  # body limit, 500s, CORS (http_guards.py)
    app.state.tokenizer_manager = tokenizer_manager
    started_at = now()  # Ollama's /api/tags gives a model's modified_at: here, when the server started
    app.state.openai_serving_chat = OpenAIServingChat(tokenizer_manager, served_model_name)
    app.state.openai_serving_completion = OpenAIServingCompletion(tokenizer_manager, served_model_name)
    app.state.serving_generate = ServingGenerate(tokenizer_manager, served_model_name)
    app.state.anthropic_serving = AnthropicServing(tokenizer_manager, served_model_name)
    app.state.ollama_chat = OllamaServingChat(tokenizer_manager, served_model_name)
    app.state.ollama_generate = OllamaServingGenerate(tokenizer_manager, served_model_name)

    async def verify_api_key(request: Request) -> None:
        if api_key is None:
            return
        given = request.headers.get("authorization", "")
        anthropic = request.headers.get("x-api-key", "")  # the anthropic client's header
        if not (hmac.compare_digest(given.encode(), f"Bearer {api_key}".encode())
                or hmac.compare_digest(anthropic.encode(), api_key.encode())):
            raise RequestError("invalid or missing API key: send 'Authorization: Bearer <key>' (or "
                               "'x-api-key: <key>')", status_code=401, code="invalid_api_key")

    auth = [Depends(verify_api_key)]
    json_body = [*auth, Depends(require_json)]  # 415 for text/plain or a form: see http_guards.py

    @app.exception_handler(RequestError)
    async def request_error(request: Request, exc: RequestError) -> JSONResponse:
        return exc.to_json_response()

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        message = f"{request.method} {request.url.path}: {exc.detail}"
        return RequestError(message, status_code=exc.status_code).to_json_response()

    @app.post("/v1/chat/completions", dependencies=json_body)
    async def openai_v1_chat_completions(raw_request: Request):
        return await raw_request.app.state.openai_serving_chat.handle_request(raw_request)

    @app.post("/v1/completions", dependencies=json_body)
    async def openai_v1_completions(raw_request: Request):
        return await raw_request.app.state.openai_serving_completion.handle_request(raw_request)

    @app.post("/v1/messages", dependencies=json_body)
    async def anthropic_v1_messages(raw_request: Request):
        return await raw_request.app.state.anthropic_serving.handle_request(raw_request)

    @app.post("/api/chat", dependencies=json_body)
    async def ollama_chat(raw_request: Request):
        return await raw_request.app.state.ollama_chat.handle_request(raw_request)

    @app.post("/api/generate", dependencies=json_body)
    async def ollama_generate(raw_request: Request):
        return await raw_request.app.state.ollama_generate.handle_request(raw_request)

    @app.get("/api/tags", dependencies=auth)
    async def ollama_tags() -> dict[str, Any]:
        """Ollama's model list: the one served model."""
        return {"models": [{"name": served_model_name, "model": served_model_name,
                            "modified_at": started_at}]}

    @app.get("/api/version")
    async def ollama_version() -> dict[str, Any]:
        return {"version": __version__}

    @app.post("/generate", dependencies=json_body)
    async def generate_request(raw_request: Request):
        return await raw_request.app.state.serving_generate.handle_request(raw_request)

    def model_card() -> ModelCard:
        return ModelCard(id=served_model_name, root=served_model_name,
                         max_model_len=tokenizer_manager.limits.max_req_len)

    @app.get("/v1/models", dependencies=auth)
    async def available_models() -> dict[str, Any]:
        return ModelList(data=[model_card()]).model_dump(mode="json")

    @app.get("/v1/models/{model:path}", dependencies=auth)
    async def retrieve_model(model: str) -> dict[str, Any]:
        if model != served_model_name:
            raise model_not_found(model, served_model_name)
        return model_card().model_dump(mode="json")

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

    @app.post("/flush_cache", dependencies=[*auth, Depends(require_json_if_body)])
    async def flush_cache(raw_request: Request) -> JSONResponse:
        if await raw_request.body():  # no body is fine; one that is there must be a JSON object
            await read_request(raw_request, FlushCacheReqInput, tokenizer_manager)
        if not await tokenizer_manager.flush_cache():
            raise RequestError("the cache can only be flushed when no request is queued or running")
        return JSONResponse({"success": True, "message": "cache flushed"})

    @app.post("/pause_generation", dependencies=json_body)
    async def pause_generation(raw_request: Request) -> JSONResponse:
        obj = await read_request(raw_request, PauseGenerationInput, tokenizer_manager)  # mode "in_place"
        tokenizer_manager.pause_generation(obj.mode)
        return JSONResponse({"success": True, "message": f"generation paused (mode {obj.mode})"})

    @app.post("/continue_generation", dependencies=[*auth, Depends(require_json_if_body)])
    async def continue_generation() -> JSONResponse:
        tokenizer_manager.continue_generation()
        return JSONResponse({"success": True, "message": "generation continued"})

    @app.post("/abort_request", dependencies=json_body)
    async def abort_request(raw_request: Request) -> JSONResponse:
        rid = (await read_request(raw_request, AbortReqInput, tokenizer_manager)).rid
        return JSONResponse({"rid": rid, "found": tokenizer_manager.abort_request(rid)})

    if worker_info is not None:  # /server_info, /model_info, /get_load, /health_generate: router_endpoints.py
        add_router_routes(app, tokenizer_manager, worker_info, auth)
    return app
