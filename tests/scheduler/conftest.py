"""The scheduler tests fork the session's one float32 Engine (`base_engine`, tests/conftest.py) with the
flags each needs."""

from __future__ import annotations

WORKLOAD = [
    "What is the capital of China?",
    "Write a haiku about the sea.",
    "Explain what a KV cache is in one sentence.",
    "List three prime numbers.",
    "Who wrote Romeo and Juliet?",
    "Give me a short tip for learning to cook.",
]


def chat(q: str) -> list[dict]:
    return [{"role": "user", "content": q}]


def assert_no_leak(engine) -> None:
    """Every KV slot is free or held by the cache, and no request slot is held."""
    sched = engine.scheduler
    pool = engine.model_runner.token_to_kv_pool
    assert sched.is_idle()
    assert pool.available_size() + sched.tree_cache.total_size() == pool.size
    assert engine.model_runner.req_to_token_pool.available_size() == engine.model_runner.req_to_token_pool.size
    assert sched.tree_cache.protected_size() == 0 if hasattr(sched.tree_cache, "protected_size") else True
    assert not sched.rid_to_req
