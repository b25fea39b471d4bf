"""Shared by the tracer tests: where the fixture traces are, and how to pick an event out of one."""

from __future__ import annotations

from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures"
ENGINE = FIXTURES / "engine_two_requests"
SERVER = FIXTURES / "server_one_request"


def find(records: list[dict], name: str, **match) -> dict:
    """The first record with this event name whose top-level fields or attrs match."""
    for r in records:
        if r["name"] == name and all(r.get(k, r.get("attrs", {}).get(k)) == v for k, v in match.items()):
            return r
    raise LookupError(f"no {name} {match}")
