"""What SGLang's router (sglang-router, SGLang's Model Gateway) asks of a worker besides the generation
endpoints, with SGLang's paths and field names:

    GET /server_info  (and the older /get_server_info)   the server's args; the router labels the worker
                                                         with model_path and served_model_name
    GET /model_info   (and the older /get_model_info)    model_path, tokenizer_path, is_generation,
                                                         model_type, architectures
    GET /get_load                                        one entry per data-parallel rank: the scheduler's
                                                         queues and KV use (GetLoadReq); power_of_two reads it
    GET /health_generate                                 generate one token: the engine really runs
                                                         (the router's --health-check-endpoint may name it)

/health and /flush_cache, which the router also calls, are in http_server.py. Reference page:
lessons/docs/reference/http-api.md ("Behind SGLang's router").
"""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI
from fastapi.params import Depends
from fastapi.responses import JSONResponse

from minisgl import __version__
from minisgl.server import tm_trace
from minisgl.server.errors import RequestError, server_shutting_down, server_unavailable
from minisgl.server.protocol import GenerateReqInput, new_id

HEALTH_GENERATE_TIMEOUT_S = 20.0  # SGLang's HEALTH_CHECK_TIMEOUT
SECRET_ARGS = ("api_key",)  # never echoed by /server_info


@dataclass(frozen=True)
class WorkerInfo:
    """The bodies of /server_info and /model_info, fixed when the server starts."""

    server_info: dict[str, Any]
    model_info: dict[str, Any]


def tokenizer_path(source: Any) -> str:
    """A Hugging Face folder holds its tokenizer; a .gguf file's tokenizer is converted once and saved in a
    folder of minisgl's tokenizer cache (model_loader/tokenizer_cache.py), which is what a tool can load."""
    if source.kind == "gguf":
        from minisgl.model_loader.tokenizer_cache import cache_dir, cache_key

        folder = cache_dir() / cache_key(source.path)
        if folder.is_dir():
            return str(folder)
    return str(source.path)


def build_worker_info(server_args: Any, http_args: Any, source: Any, model_config: Any, scheduler_info: dict,
                      served_model_name: str, dp_size: int = 1) -> WorkerInfo:
    """server_info as SGLang's: every server arg (`model` under SGLang's name `model_path`), the scheduler's
    numbers (max_total_num_tokens...) and the version; model_info from the model's config."""
    args = {k: v for k, v in dataclasses.asdict(server_args).items() if k != "model"}
    args.update({k: v for k, v in dataclasses.asdict(http_args).items() if k not in SECRET_ARGS})
    model_path, tok_path = str(source.path), tokenizer_path(source)
    server_info = {
        "model_path": model_path, "tokenizer_path": tok_path, **args,
        "served_model_name": served_model_name, "tp_size": 1, "dp_size": dp_size,
        "max_total_num_tokens": scheduler_info["max_total_num_tokens"],
        "max_req_len": scheduler_info["max_req_len"], "context_len": scheduler_info["context_len"],
        "version": __version__,
    }
    architecture = model_config.architecture  # e.g. LlamaForCausalLM, whose Hugging Face model_type is llama
    model_info = {
        "model_path": model_path, "tokenizer_path": tok_path, "is_generation": True,
        "model_type": architecture.removesuffix("ForCausalLM").lower(), "architectures": [architecture],
        "served_model_name": served_model_name, "weight_version": "default",
        "has_image_understanding": False, "has_audio_understanding": False,
    }
    return WorkerInfo(server_info, model_info)


def add_router_routes(app: FastAPI, tokenizer_manager: Any, info: WorkerInfo, auth: list[Depends]) -> None:
    @app.get("/server_info", dependencies=auth)
    @app.get("/get_server_info", dependencies=auth)  # the name older SGLang servers answer to
    async def server_info() -> dict[str, Any]:
        return info.server_info

    @app.get("/model_info", dependencies=auth)
    @app.get("/get_model_info", dependencies=auth)
    async def model_info() -> dict[str, Any]:
        return info.model_info

    @app.get("/get_load", dependencies=auth)
    async def get_load() -> JSONResponse:
        """SGLang's shape: a list with one entry per data-parallel rank (--dp-size). num_tokens is the KV
        slots running requests hold (the radix cache's evictable slots not counted); the router's power_of_two
        policy sums num_tokens over the list."""
        loads = await tokenizer_manager.get_loads()
        return JSONResponse([{"dp_rank": load.dp_rank,
                              "num_reqs": load.num_running_reqs + load.num_waiting_reqs,
                              "num_running_reqs": load.num_running_reqs,
                              "num_waiting_reqs": load.num_waiting_reqs,
                              "num_tokens": load.total_slots - load.free_slots - load.cached_slots}
                             for load in loads])

    @app.get("/health_generate")
    async def health_generate() -> JSONResponse:
        """200 once one real token came out of the engine, else 503, as SGLang's /health_generate."""
        if tokenizer_manager.dead_reason is not None:
            return server_unavailable(tokenizer_manager.dead_reason).to_json_response()
        if tokenizer_manager.shutting_down:
            return server_shutting_down().to_json_response()
        params = {"max_new_tokens": 1, "temperature": 0.0}
        obj = GenerateReqInput(rid=f"HEALTH_CHECK_{new_id()}", input_ids=[0], sampling_params=params)
        tm_trace.request_received(obj.rid, "/health_generate", "GenerateReqInput", False, params)
        generator = tokenizer_manager.generate_request(obj)
        try:
            out = await asyncio.wait_for(generator.__anext__(), HEALTH_GENERATE_TIMEOUT_S)
        except RequestError as e:
            tm_trace.error(obj.rid, e.status_code, e.message)
            return RequestError(f"health check failed: {e.message}", status_code=503).to_json_response()
        except asyncio.TimeoutError:
            tm_trace.error(obj.rid, 503, "no token within the health check's timeout")
            return RequestError(f"health check failed: no token within {HEALTH_GENERATE_TIMEOUT_S:.0f} s",
                                status_code=503).to_json_response()
        finally:
            await generator.aclose()
        tm_trace.response_finished(obj.rid, out["meta_info"], 200)
        return JSONResponse({"status": "ok"})
