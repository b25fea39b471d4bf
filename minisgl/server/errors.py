"""RequestError: a request the server will not serve, carrying the HTTP status and OpenAI error fields.

Raised anywhere between the endpoint and the TokenizerManager's first output, so the endpoint can answer
with the right status line instead of starting a response it would have to break. It is a ValueError: the
offline Engine raises the same errors from the same checks, and its callers catch a bad argument as usual.
"""

from __future__ import annotations

from fastapi.responses import JSONResponse

from minisgl.server.protocol import ErrorResponse


class RequestError(ValueError):
    def __init__(self, message: str, status_code: int = 400, err_type: str = "invalid_request_error",
                 param: str | None = None, code: str | int | None = None):
        super().__init__(message)
        self.message = message
        self.status_code = status_code
        self.err_type = err_type
        self.param = param
        self.code = code

    def to_response(self) -> ErrorResponse:
        return ErrorResponse.make(self.message, type=self.err_type, param=self.param, code=self.code)

    def to_json_response(self) -> JSONResponse:
        return JSONResponse(self.to_response().model_dump(), status_code=self.status_code)


def server_unavailable(reason: str) -> RequestError:
    """503: a child process died, so nothing can be generated any more; the message says which and why."""
    return RequestError(f"the server cannot serve requests: {reason}", status_code=503, err_type="server_error",
                        code="service_unavailable")


def client_disconnected() -> RequestError:
    """Nobody reads this answer; 499 is nginx's name for it and keeps the server log honest."""
    return RequestError("the client closed the connection", status_code=499, code="client_disconnected")
