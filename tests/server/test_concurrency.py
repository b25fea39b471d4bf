"""32 streaming clients at once: every one completes, and each gets the answer it gets when it is alone.

Greedy float32 decoding does not depend on which other requests share the batch, so batching is invisible
to a client; a mix-up of rids in handle_loop or the detokenizer would show as a wrong answer here.
"""

from __future__ import annotations

import asyncio

from tests.server.conftest import API_KEY, wait_drained

QUESTIONS = [
    "What is the capital of China?",
    "Name a primary color.",
    "What is 2 plus 2?",
    "Say hello in French.",
    "What animal says moo?",
    "Name a planet.",
    "What is the opposite of hot?",
    "Which season comes after winter?",
]
COPIES = 4  # 8 questions x 4 = 32 clients; the copies also share prefixes in the radix cache
MAX_TOKENS = 12


def _messages(q: str) -> list[dict]:
    return [{"role": "user", "content": q}]


async def _stream_all(url: str, model: str) -> list[str]:
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=f"{url}/v1", api_key=API_KEY, max_retries=0, timeout=600)

    async def one(q: str) -> str:
        stream = await client.chat.completions.create(model=model, messages=_messages(q), temperature=0,
                                                      max_tokens=MAX_TOKENS, stream=True)
        parts, reasons = [], []
        async for chunk in stream:
            if chunk.choices:
                parts.append(chunk.choices[0].delta.content or "")
                reasons.append(chunk.choices[0].finish_reason)
        assert reasons[-1] in ("stop", "length")
        return "".join(parts)

    try:
        return await asyncio.gather(*(one(q) for q in QUESTIONS * COPIES))
    finally:
        await client.close()


def test_32_concurrent_streams_equal_sequential_answers(server, client, model, http):
    sequential = [
        client.chat.completions.create(model=model, messages=_messages(q), temperature=0, max_tokens=MAX_TOKENS)
        .choices[0].message.content
        for q in QUESTIONS
    ]
    concurrent = asyncio.run(_stream_all(server.url, model))
    assert len(concurrent) == len(QUESTIONS) * COPIES
    for i, text in enumerate(concurrent):
        assert text == sequential[i % len(QUESTIONS)], QUESTIONS[i % len(QUESTIONS)]
    wait_drained(http)
