"""Greedy outputs must not depend on how the scheduler batches, chunks, caches or retracts."""

from __future__ import annotations

import pytest

from .conftest import WORKLOAD, assert_no_leak, chat

PARAMS = {"max_new_tokens": 16, "temperature": 0}


@pytest.fixture(scope="module")
def reference(base_engine):
    """Each prompt alone, no radix cache, no chunking: the plainest schedule."""
    engine = base_engine.fork(disable_radix_cache=True, chunked_prefill_size=-1, max_running_requests=1)
    outs = [engine.generate(chat(q), PARAMS)["output_ids"] for q in WORKLOAD]
    assert_no_leak(engine)
    return outs


CONFIGS = {
    # the base Engine's flags: radix cache on, fcfs, 32 running requests, chunks of 512 rows (more than the
    # whole workload's ~270 prompt tokens, so this is also the no-chunking schedule)
    "default": dict(),
    "radix-off": dict(disable_radix_cache=True),
    "chunk-8": dict(chunked_prefill_size=8),
    "chunk-64": dict(chunked_prefill_size=64),
    "mixed-chunk": dict(enable_mixed_chunk=True, chunked_prefill_size=16),
    "max-running-1": dict(max_running_requests=1),
    "lpm": dict(schedule_policy="lpm"),
    "small-kv": dict(max_total_tokens=150, chunked_prefill_size=32),
}


def test_the_default_schedule_prefills_the_whole_workload_in_one_round(base_engine):
    """What makes "default" stand for the no-chunking, 32-running, fcfs schedule as well."""
    engine = base_engine.fork()
    args = engine.server_args
    assert (args.schedule_policy, args.max_running_requests, args.disable_radix_cache) == ("fcfs", 32, False)
    lengths = [len(engine.tokenizer.apply_chat_template(chat(q), add_generation_prompt=True, tokenize=True,
                                                        return_dict=False)) for q in WORKLOAD]
    assert sum(lengths) < args.chunked_prefill_size and len(WORKLOAD) < args.max_running_requests


@pytest.mark.parametrize("name", list(CONFIGS))
def test_same_greedy_tokens(base_engine, reference, name):
    engine = base_engine.fork(**CONFIGS[name])
    outs = engine.generate([chat(q) for q in WORKLOAD], PARAMS)
    assert [o["output_ids"] for o in outs] == reference
    assert all(o["finish_reason"]["type"] in ("stop", "length") for o in outs)
    assert_no_leak(engine)
    engine.flush_cache()
    pool = engine.model_runner.token_to_kv_pool
    assert pool.available_size() == pool.size


def test_shared_prefix_is_cached(base_engine):
    engine = base_engine.fork()
    first = engine.generate(chat(WORKLOAD[0]), PARAMS)
    second = engine.generate(chat(WORKLOAD[0]), PARAMS)
    assert first["usage"]["cached_tokens"] == 0
    assert second["usage"]["cached_tokens"] == first["usage"]["prompt_tokens"] - 1
    assert first["output_ids"] == second["output_ids"]


RETRACT_PROMPTS = ["The history of the Roman empire", "A recipe for bread:", "Dear diary, today I",
                   "The rules of chess are", "In the year 2050, cities"]
RETRACT_PARAMS = {"max_new_tokens": 20, "temperature": 0, "ignore_eos": True}


@pytest.fixture(scope="module")
def roomy_outputs(base_engine) -> list[list[int]]:
    """The retraction prompts' tokens in a pool big enough that nothing is retracted (once for every case)."""
    roomy = base_engine.fork()
    outs = [o["output_ids"] for o in roomy.generate(RETRACT_PROMPTS, RETRACT_PARAMS)]
    assert roomy.scheduler.num_retracted == 0
    return outs


# 5 prompts of about 7 tokens, 20 new tokens each: 70 slots admit them all, then run out while decoding
@pytest.mark.parametrize("flags", [dict(max_total_tokens=70), dict(max_total_tokens=70, chunked_prefill_size=8),
                                   dict(max_total_tokens=70, disable_radix_cache=True)])
def test_retracted_requests_resume_with_the_same_tokens(base_engine, roomy_outputs, flags):
    tight = base_engine.fork(**flags)
    got = [o["output_ids"] for o in tight.generate(RETRACT_PROMPTS, RETRACT_PARAMS)]
    assert tight.scheduler.num_retracted > 0, "the pool must be small enough to force a retraction"
    assert got == roomy_outputs
    assert_no_leak(tight)
