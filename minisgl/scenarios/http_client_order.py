"""Streaming clients whose requests reach the server in a fixed order, for the scenarios where the order
decides something (which data-parallel rank a request lands on)."""

from __future__ import annotations

import threading
from typing import Any

from minisgl.scenarios.http_client import stream_chat

FIRST_CHUNK_TIMEOUT = 300  # seconds: a first token on a busy 2-core machine


def stream_chats_in_order(url: str, asks: list[tuple]) -> dict[str, dict[str, Any]]:
    """Stream one chat per (rid, question, max_tokens[, body fields[, headers]]), all in flight together;
    each is sent once the one before has streamed its first message, so the server received them in the
    order given (two requests sent at the same moment reach it in either order)."""
    results: dict[str, dict[str, Any]] = {}
    threads = []
    for rid, question, max_tokens, *how in asks:
        started = threading.Event()
        extra, headers = (*how, None, None)[:2]

        def one(rid=rid, question=question, max_tokens=max_tokens, started=started, extra=extra,
                headers=headers) -> None:
            try:
                results[rid] = stream_chat(url, rid, question, max_tokens, on_first=started.set, extra=extra,
                                           headers=headers)
            except Exception as e:  # noqa: BLE001  (the caller reports it as this request's result)
                results[rid] = {"rid": rid, "error": f"{type(e).__name__}: {e}"}
            finally:
                started.set()

        thread = threading.Thread(target=one, name=f"client-{rid}", daemon=True)
        thread.start()
        threads.append(thread)
        if not started.wait(FIRST_CHUNK_TIMEOUT):
            raise RuntimeError(f"{rid}: no first message within {FIRST_CHUNK_TIMEOUT} s")
    for thread in threads:
        thread.join(FIRST_CHUNK_TIMEOUT)
    errors = [r["error"] for r in results.values() if "error" in r]
    if errors:
        raise RuntimeError("; ".join(errors))
    return results
