"""Why a request stopped. `to_json()` is what the API reports as finish_reason."""

from __future__ import annotations


class BaseFinishReason:
    def to_json(self) -> dict:
        raise NotImplementedError


class FINISH_MATCHED_TOKEN(BaseFinishReason):
    def __init__(self, matched: int):
        self.matched = matched

    def to_json(self) -> dict:
        return {"type": "stop", "matched": self.matched}


class FINISH_MATCHED_STR(BaseFinishReason):
    def __init__(self, matched: str):
        self.matched = matched

    def to_json(self) -> dict:
        return {"type": "stop", "matched": self.matched}


class FINISH_LENGTH(BaseFinishReason):
    def __init__(self, length: int):
        self.length = length

    def to_json(self) -> dict:
        return {"type": "length", "length": self.length}


class FINISH_ABORT(BaseFinishReason):
    """Aborted by the client, or refused before it ran (status_code 400 then)."""

    def __init__(self, message: str = "aborted", status_code: int | None = None):
        self.message = message
        self.status_code = status_code

    def to_json(self) -> dict:
        return {"type": "abort", "message": self.message, "status_code": self.status_code}
