"""The HTTP server: the FastAPI app with its endpoints, and `launch_server`, which runs the whole server.

    main process         FastAPI + uvicorn, OpenAIServingChat / OpenAIServingCompletion, TokenizerManager
    scheduler process    ModelRunner + Scheduler.event_loop_normal          (minisgl/server/scheduler_process.py)
    detokenizer process  DetokenizerManager loop        (minisgl/detokenizer/detokenizer_process.py)
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import signal
import sys
from typing import Any

import uvicorn
from fastapi import Depends, FastAPI
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request

from minisgl import __version__
from minisgl.server.errors import RequestError, server_unavailable
from minisgl.server.http_server_args import HttpServerArgs
from minisgl.server.port_args import PortArgs
from minisgl.server.protocol import ModelCard, ModelList
from minisgl.server.serving_chat import OpenAIServingChat
from minisgl.server.serving_completions import OpenAIServingCompletion
from minisgl.server.serving_generate import ServingGenerate
from minisgl.server.subprocesses import EngineProcesses, StartupError
from minisgl.server.tokenizer_manager import EngineLimits, TokenizerManager
from minisgl.server_args import ServerArgs
from tracer.api import tracer

logger = logging.getLogger(__name__)

WATCHDOG_INTERVAL_S = 0.2
DEATH_GRACE_S = 1.0  # after a child died: time for waiting clients to receive their 503 before the port closes


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


# ---- the whole server -----------------------------------------------------------------------------
class _StopFlag:
    """SIGINT/SIGTERM only set a flag: start-up polls it, and uvicorn hands its signals back to it on exit,
    so cleanup in launch_server's `finally` always runs."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._old = {sig: signal.signal(sig, self._handle) for sig in (signal.SIGINT, signal.SIGTERM)}

    def _handle(self, signum: int, frame: Any) -> None:
        self.signum = signum

    def is_set(self) -> bool:
        return self.signum is not None

    def restore(self) -> None:
        for sig, handler in self._old.items():
            signal.signal(sig, handler)


def launch_server(server_args: ServerArgs, http_args: HttpServerArgs) -> int:
    """Start the children, wait until they are ready, serve until a signal or a child's death; clean up.
    Returns the exit status: 0 after a signal, 1 if a child died, 2 if the model could not be loaded."""
    from minisgl.model_loader.loader import load_model_config, load_tokenizer, resolve_model

    logging.basicConfig(level=http_args.log_level.upper(),
                        format="[tokenizer_manager %(process)d] %(levelname)s %(name)s: %(message)s")
    source = resolve_model(server_args.model)  # a missing model fails here, before any child starts
    load_model_config(source)
    served_model_name = http_args.served_model_name or source.name
    trace_dir = http_args.resolve_trace_dir()
    if trace_dir is not None:
        tracer.configure(trace_dir, "tokenizer_manager", http_args.trace_level)
        print(f"minisgl serve: tracing to {trace_dir} (level {http_args.trace_level})", flush=True)
    stop = _StopFlag()
    port_args = PortArgs.init_new()
    processes: EngineProcesses | None = None
    print(f"minisgl serve: starting the scheduler and detokenizer processes (sockets in {port_args.ipc_dir})",
          flush=True)
    try:
        processes = EngineProcesses(server_args, http_args, port_args)
        tokenizer = load_tokenizer(source)  # while the children load the model
        processes.wait_ready(stop.is_set)
        info = processes["scheduler"].info
        limits = EngineLimits(info["max_req_len"], info["max_total_num_tokens"], info["context_len"],
                              info["vocab_size"])
        return asyncio.run(_serve(http_args, port_args, processes, tokenizer, limits, served_model_name, stop))
    except StartupError as e:
        print(f"minisgl serve: error: {e}", file=sys.stderr, flush=True)
        return e.exit_code
    except KeyboardInterrupt:
        return 0
    finally:
        if processes is not None:
            processes.stop()
        port_args.remove()
        tracer.close()
        stop.restore()


async def _serve(http_args: HttpServerArgs, port_args: PortArgs, processes: EngineProcesses, tokenizer,
                 limits: EngineLimits, served_model_name: str, stop: _StopFlag) -> int:
    if stop.is_set():
        return 0
    tokenizer_manager = TokenizerManager(port_args, tokenizer, limits)
    app = create_app(tokenizer_manager, served_model_name, http_args.api_key, processes.pids())
    config = uvicorn.Config(app, host=http_args.host, port=http_args.port, log_level=http_args.log_level,
                            access_log=http_args.log_level == "debug", timeout_graceful_shutdown=3)
    server = uvicorn.Server(config)
    outcome = {"exit_code": 0}
    tasks = [
        asyncio.create_task(tokenizer_manager.handle_loop(), name="handle_loop"),
        asyncio.create_task(_watchdog(processes, tokenizer_manager, server, outcome), name="watchdog"),
        asyncio.create_task(_announce_when_ready(server, http_args.host, served_model_name, processes),
                            name="announce"),
    ]
    tasks[0].add_done_callback(lambda task: _loop_ended(task, tokenizer_manager, server, outcome))
    try:
        await server.serve()
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        tokenizer_manager.close()
    return outcome["exit_code"]


def _loop_ended(task: asyncio.Task, tokenizer_manager: TokenizerManager, server: uvicorn.Server,
                outcome: dict[str, int]) -> None:
    """handle_loop runs until shutdown; if it stops on its own no reply can reach a waiter again: answer
    everyone with 503 and shut down (exit status 1), instead of letting each request wait for its timeout."""
    if task.cancelled() or server.should_exit:
        return
    exc = task.exception()
    reason = "the TokenizerManager's handle_loop stopped" + (f": {type(exc).__name__}: {exc}" if exc else "")
    print(f"minisgl serve: error: {reason}; failing every request with 503 and shutting down",
          file=sys.stderr, flush=True)
    tokenizer_manager.fail_all(reason)
    outcome["exit_code"] = 1
    server.should_exit = True


async def _watchdog(processes: EngineProcesses, tokenizer_manager: TokenizerManager, server: uvicorn.Server,
                    outcome: dict[str, int]) -> None:
    """A dead child means no more tokens: answer everyone with 503 at once, then shut down, exit status 1."""
    while not server.should_exit:
        await asyncio.sleep(WATCHDOG_INTERVAL_S)
        dead = processes.first_death()
        if dead is None:
            continue
        reason = dead.death_reason()
        print(f"minisgl serve: error: {reason}; failing every request with 503 and shutting down",
              file=sys.stderr, flush=True)
        tokenizer_manager.fail_all(reason)
        outcome["exit_code"] = 1
        await asyncio.sleep(DEATH_GRACE_S)
        server.should_exit = True
        return


async def _announce_when_ready(server: uvicorn.Server, host: str, served_model_name: str,
                               processes: EngineProcesses) -> None:
    while not server.started:
        await asyncio.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    pids = ", ".join(f"{name} pid {pid}" for name, pid in processes.pids().items())
    print(f"minisgl serve: ready at http://{host}:{port} (model {served_model_name}; {pids})", flush=True)
