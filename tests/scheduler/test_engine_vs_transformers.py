"""The referee for the whole Engine, not only its forward pass: through the scheduler, the radix cache,
chunked prefill, batched decode and the greedy sampling kernel, the Engine's greedy tokens equal
transformers' own (float32, same weights)."""

from __future__ import annotations

import pytest

from minisgl import kernels
from tests.conftest import NEW_TOKENS
from tests.scheduler.conftest import assert_no_leak

pytestmark = pytest.mark.slow

GREEDY = {"max_new_tokens": NEW_TOKENS, "ignore_eos": True, "temperature": 0}
CHUNK = 16  # shorter than every chat prompt: each prompt is prefilled over two or more rounds


@pytest.fixture(scope="module")
def engine(base_engine):
    engine = base_engine.fork(chunked_prefill_size=CHUNK)
    if kernels.load():  # where the kernels build, greedy rows go through the sampling kernel
        assert engine.scheduler.tp_worker.sampler.use_kernel
    return engine


def test_one_at_a_time_with_chunks_and_prefix_hits(engine, chat_prompt_ids, hf_answers):
    assert min(map(len, chat_prompt_ids)) > CHUNK
    engine.flush_cache()
    results = [engine.generate(input_ids=p, sampling_params=GREEDY) for p in chat_prompt_ids]
    assert [r["output_ids"] for r in results] == hf_answers
    # every prompt after the first starts with the chat template's shared prefix, served from the cache
    assert results[0]["usage"]["cached_tokens"] == 0
    assert all(r["usage"]["cached_tokens"] > 0 for r in results[1:])
    assert_no_leak(engine)


def test_all_at_once_over_a_warm_cache(engine, chat_prompt_ids, hf_answers):
    """The prompts prefilled together in chunks, then decoded as one batch, each over its cached prompt."""
    engine.flush_cache()
    engine.generate(input_ids=chat_prompt_ids[0], sampling_params={**GREEDY, "max_new_tokens": 1})
    results = engine.generate(input_ids=chat_prompt_ids, sampling_params=GREEDY)
    assert [r["output_ids"] for r in results] == hf_answers
    # the first prompt ran before: all of it is cached but its last token, which is computed for its logits
    assert results[0]["usage"]["cached_tokens"] == len(chat_prompt_ids[0]) - 1
    assert_no_leak(engine)
