"""The HTTP server's guards: what every request must pass before an endpoint spends time on it.

- `BodyLimitMiddleware`: a body over --max-request-body-bytes gets 413, told by Content-Length before a byte
  is read, or counted while a chunked body arrives, so no more than the limit is ever held in memory.
- `require_json`: a POST endpoint that reads JSON answers 415 to any other Content-Type. A web page may send
  text/plain or form data to any origin without asking first (no CORS preflight); application/json needs
  the preflight, which this server grants only to --allowed-origins. So a page cannot drive a local server
  that has no API key.
- `InternalErrorMiddleware`: an unexpected exception becomes a 500 in OpenAI's error format and the
  connection stays open for the client's next request (Starlette's own 500 handler re-raises, and uvicorn
  then closes the connection).
- `install_guards`: all of the above on an app, plus CORS only when origins are allowed.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request

from minisgl.server.errors import RequestError

logger = logging.getLogger(__name__)

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[MutableMapping[str, Any], Receive, Send], Awaitable[None]]


def body_too_large(limit: int, size: int | None = None) -> RequestError:
    said = f"{size} bytes" if size is not None else f"more than {limit} bytes"
    return RequestError(f"the request body is too large: {said}, but this server takes at most {limit} "
                        f"(--max-request-body-bytes)", status_code=413, code="request_too_large")


class BodyLimitMiddleware:
    """413 for a body over `max_bytes`. Content-Length is checked before the app runs; a chunked body is
    counted as the app reads it, and the read that crosses the limit raises the 413 (a RequestError, which
    the endpoint or the app's handler answers like any other). Whatever the client still sends after the
    answer is read and dropped by uvicorn, so the connection stays usable."""

    def __init__(self, app: ASGIApp, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await body_too_large(self.max_bytes, declared).to_json_response()(scope, receive, send)
            return
        received = 0

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise body_too_large(self.max_bytes)
            return message

        await self.app(scope, counting_receive, send)


def _content_length(scope: MutableMapping[str, Any]) -> int | None:
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None  # h11 refuses a malformed Content-Length before the app sees the request
    return None


def has_body(request: Request) -> bool:
    length = request.headers.get("content-length")
    return "transfer-encoding" in request.headers or (length is not None and length.strip() != "0")


async def require_json(request: Request) -> None:
    """415 unless the body is declared as application/json (a charset parameter is fine)."""
    content_type = request.headers.get("content-type", "")
    media_type = content_type.split(";", 1)[0].strip().lower()
    if media_type != "application/json":
        shown = f"'{content_type}'" if content_type else "none"
        raise RequestError(f"the body must be sent as 'Content-Type: application/json', got {shown}",
                           status_code=415, code="unsupported_media_type")


async def require_json_if_body(request: Request) -> None:
    """For an endpoint that takes no arguments (/flush_cache): no body is fine, a body must be JSON."""
    if has_body(request):
        await require_json(request)


class InternalErrorMiddleware:
    """An exception no handler took: log it and answer 500 in OpenAI's format, unless the response had
    started already (a stream cut short cannot be finished; then the exception goes on, and uvicorn closes
    the connection, the only way to tell the client its body is incomplete)."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def watching_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, watching_send)
        except Exception as exc:
            if started:
                raise
            logger.exception("%s %s failed", scope["method"], scope["path"])
            error = RequestError(f"internal server error: {type(exc).__name__}: {exc}", status_code=500,
                                 err_type="server_error")
            await error.to_json_response()(scope, receive, send)


def install_guards(app: Any, max_request_body_bytes: int, allowed_origins: list[str] | None = None) -> None:
    """Wrap `app` (FastAPI or Starlette) in the guards; the last added runs first: CORS (only with allowed
    origins, so a preflight is answered before anything else), then the body limit, then the 500 catcher."""
    app.add_middleware(InternalErrorMiddleware)
    app.add_middleware(BodyLimitMiddleware, max_bytes=max_request_body_bytes)
    if allowed_origins:
        app.add_middleware(CORSMiddleware, allow_origins=allowed_origins, allow_methods=["GET", "POST"],
                           allow_headers=["Authorization", "Content-Type"])
