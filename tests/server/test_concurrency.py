"""32 streaming clients at once, each with its own question: every one completes, and each gets the answer
the offline Engine with the server's flags gives its question.

Greedy float32 decoding does not depend on which other requests share the batch (tests/scheduler's
equivalence tests run the same prompts one at a time and batched), so the Engine may answer all 32 in its
own batches, and batching is invisible to a client; a mix-up of rids in handle_loop or the detokenizer would
show as a wrong answer here, since no two of the questions have the same answer. (They all share the chat
template's prefix in the radix cache.)
"""

from __future__ import annotations

import asyncio

from tests.server.conftest import API_KEY, wait_drained

QUESTIONS = [  # 32 different questions, so 32 different answers: a client given another's shows
    "What is the capital of China?",
    "Name a primary color.",
    "What is 2 plus 2?",
    "Say hello in French.",
    "What animal says moo?",
    "Name a planet.",
    "What is the opposite of hot?",
    "Which season comes after winter?",
    "What is the capital of France?",
    "What is the largest ocean?",
    "How many legs does a spider have?",
    "What color is the sky?",
    "Name a fruit that is yellow.",
    "What do bees make?",
    "What is the boiling point of water?",
    "Who wrote Hamlet?",
    "What is 10 times 3?",
    "Name a musical instrument.",
    "What is the freezing point of water?",
    "What language is spoken in Spain?",
    "How many days are in a week?",
    "What gas do plants breathe in?",
    "Name a type of tree.",
    "What is the tallest animal?",
    "What shape has three sides?",
    "What is the capital of Japan?",
    "Name a vegetable.",
    "What do cows drink?",
    "How many continents are there?",
    "What is the chemical symbol for gold?",
    "Name a sport played with a ball.",
    "What is the first letter of the alphabet?",
]
MAX_TOKENS = 12
GREEDY = {"max_new_tokens": MAX_TOKENS, "temperature": 0}


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
        return await asyncio.gather(*(one(q) for q in QUESTIONS))
    finally:
        await client.close()


def test_32_concurrent_streams_equal_sequential_answers(server, model, http, engine):
    # the answer each client must get inside the crowd
    alone = [out["text"] for out in engine.generate([_messages(q) for q in QUESTIONS], GREEDY)]
    assert len(set(alone)) == len(QUESTIONS), "two questions have the same answer: a swap would not show"
    concurrent = asyncio.run(_stream_all(server.url, model))
    assert len(concurrent) == len(QUESTIONS) == 32
    for q, text, expected in zip(QUESTIONS, concurrent, alone):
        assert text == expected, q
    wait_drained(http)
