"""Errors as OpenAI sends them: the body (ErrorResponse), one clear message for a request that fails
validation (format_validation_error), and RequestError, a request the server will not serve, carrying the HTTP
status and the OpenAI error fields.

Raised anywhere between the endpoint and the TokenizerManager's first output, so the endpoint can answer
with the right status line instead of starting a response it would have to break. It is a ValueError: the
offline Engine raises the same errors from the same checks, and its callers catch a bad argument as usual.
"""

from __future__ import annotations

from fastapi.responses import JSONResponse
from pydantic import BaseModel, ValidationError


class ErrorDetail(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: str | int | None = None


class ErrorResponse(BaseModel):
    """Exactly OpenAI's error body, so client libraries raise their usual exceptions."""

    error: ErrorDetail

    @classmethod
    def make(
        cls,
        message: str,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | int | None = None,
    ) -> ErrorResponse:
        return cls(error=ErrorDetail(message=message, type=type, param=param, code=code))


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


def model_not_found(model: str, served_model_name: str) -> RequestError:
    """404: the request names a model this server does not serve."""
    return RequestError(f"the model `{model}` does not exist: this server serves `{served_model_name}`",
                        status_code=404, param="model", code="model_not_found")


def server_unavailable(reason: str) -> RequestError:
    """503: a child process died, so nothing can be generated any more; the message says which and why."""
    return RequestError(f"the server cannot serve requests: {reason}", status_code=503,
                        err_type="server_error", code="service_unavailable")


def server_shutting_down(message: str = "the server is shutting down and accepts no new requests"
                         ) -> RequestError:
    """503 during a graceful shutdown: refused before it started, or stopped when the grace period ended."""
    return RequestError(message, status_code=503, err_type="server_error", code="server_shutting_down")


def client_disconnected() -> RequestError:
    """Nobody reads this answer; 499 is nginx's name for it and keeps the server log honest."""
    return RequestError("the client closed the connection", status_code=499, code="client_disconnected")


def _is_union_tag(part: str) -> bool:
    """Pydantic puts the union member it tried ("str", "list[int]") into an error's location; no field."""
    return part in {"str", "int", "float", "bool"} or not part.isidentifier()


def _field_loc(loc: tuple[int | str, ...]) -> tuple[int | str, ...]:
    return tuple(part for part in loc if isinstance(part, int) or not _is_union_tag(part))


def _param_path(loc: tuple[int | str, ...]) -> str | None:
    """("messages", 0, "role") -> "messages[0].role", the way OpenAI names a nested param."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else part
    return path or None


def format_validation_error(exc: ValidationError) -> ErrorResponse:
    """One clear message for the first bad field, naming it in `param`.

    A field the model does not define gets OpenAI's own message for it. A union field fails once per member:
    the deepest failure is where the input really went wrong, a broken rule beats "wrong type" from members
    that never matched, and what is left is joined with "or".
    """
    errors = exc.errors()
    locs = [_field_loc(error["loc"]) for error in errors]
    deepest = max((loc for loc in locs if loc[:1] == locs[0][:1]), key=len)
    here = [error for loc, error in zip(locs, errors) if loc == deepest]
    rules = [error for error in here if not error["type"].endswith("_type")]
    messages: list[str] = []
    for error in rules or here:
        msg = error["msg"].removeprefix("Value error, ")
        if msg not in messages:
            messages.append(msg)
    joined = messages[0] + "".join(f" or {m.removeprefix('Input should be ')}" for m in messages[1:])
    param = _param_path(deepest)
    if param and all(error["type"] == "extra_forbidden" for error in here):  # OpenAI's words for it
        return ErrorResponse.make(f"Unrecognized request argument supplied: {param}", param=param)
    return ErrorResponse.make(f"{param}: {joined}" if param else joined, param=param)
