"""The engine's forward over the paged KV cache must give transformers' greedy tokens (float32)."""

from __future__ import annotations

import torch

from minisgl.model_executor.static_generate import decode, extend, greedy_generate
from tests.conftest import NEW_TOKENS  # hf_answers: transformers' greedy tokens, NEW_TOKENS per chat prompt


def test_greedy_one_at_a_time(runner_fp32, chat_prompt_ids, hf_answers):
    for prompt, expected in zip(chat_prompt_ids, hf_answers):
        (got,) = greedy_generate(runner_fp32, [prompt], NEW_TOKENS)
        assert got == expected
    assert runner_fp32.token_to_kv_pool.available_size() == runner_fp32.token_to_kv_pool.size


def test_greedy_batched_extend_then_decode(runner_fp32, chat_prompt_ids, hf_answers):
    assert len({len(p) for p in chat_prompt_ids}) > 1, "prompts must differ in length"
    got = greedy_generate(runner_fp32, chat_prompt_ids, NEW_TOKENS)
    assert got == hf_answers
    assert runner_fp32.req_to_token_pool.available_size() == runner_fp32.req_to_token_pool.size


def test_greedy_batched_with_torch_ops_only(runner_fp32, bundled_source, model_config, chat_prompt_ids,
                                            hf_answers):
    """--cpu-kernels off: the same weights through torch's own ops (SDPA over gathered KV) agree too."""
    from minisgl.model_executor.model_runner import ModelRunner
    from minisgl.server_args import ServerArgs

    torch_only = ModelRunner(model_config, bundled_source, ServerArgs(dtype="float32", max_total_tokens=4096,
                                                                      max_running_requests=16, cpu_kernels="off"),
                             model=runner_fp32.model)
    assert greedy_generate(torch_only, chat_prompt_ids, NEW_TOKENS) == hf_answers


def test_answer_to_capital_question(runner_fp32, chat_prompt_ids, tokenizer, model_config):
    (out,) = greedy_generate(runner_fp32, [chat_prompt_ids[0]], 20, model_config.eos_token_ids)
    assert tokenizer.decode(out, skip_special_tokens=True) == "The capital of China is Beijing."


def test_extend_logits_only_for_last_rows(runner_fp32, chat_prompt_ids):
    """Nine input rows (6 + 3) give two logit rows, as in the seeds' R1/R2 example."""
    r = runner_fp32
    idxs = r.req_to_token_pool.alloc(2)
    prompts = [chat_prompt_ids[0][:6], chat_prompt_ids[1][:3]]
    logits, loc = extend(r, idxs, prompts, [0, 0])
    try:
        assert loc.numel() == 9
        assert logits.shape == (2, r.model_config.vocab_size)
    finally:
        r.token_to_kv_pool.free(loc)
        r.req_to_token_pool.free(idxs)


TOLERANCE = 1e-4  # float32, max absolute difference of logits


def test_cached_prefix_plus_extend_equals_full_prefill(runner_fp32, chat_prompt_ids):
    """Prefill P[:k], then extend P[k:] on top of the cached prefix: same last-row logits as one prefill."""
    r = runner_fp32
    prompt = chat_prompt_ids[4]
    k = len(prompt) // 2
    (a,), (b,) = r.req_to_token_pool.alloc(1), r.req_to_token_pool.alloc(1)
    full, loc_full = extend(r, [a], [prompt], [0])
    _, loc_prefix = extend(r, [b], [prompt[:k]], [0])
    part, loc_rest = extend(r, [b], [prompt], [k])
    try:
        assert (full - part).abs().max().item() < TOLERANCE
        assert full.argmax().item() == part.argmax().item()
        # the prefix request's slots are not contiguous with the rest: the history is read via req_to_token
        row = r.req_to_token_pool.req_to_token[b, : len(prompt)]
        assert torch.equal(row, torch.cat([loc_prefix, loc_rest]))
        # and one decode step on both gives the same logits again
        nxt = int(full.argmax())
        d1, l1 = decode(r, [a], [nxt], [len(prompt) + 1])
        d2, l2 = decode(r, [b], [nxt], [len(prompt) + 1])
        assert (d1 - d2).abs().max().item() < TOLERANCE
    finally:
        r.token_to_kv_pool.free(torch.cat([loc_full, loc_prefix, loc_rest, l1, l2]))
        r.req_to_token_pool.free([a, b])


def test_positions_are_logical_and_out_cache_loc_is_storage():
    from minisgl.model_executor.forward_batch_info import ForwardMode, compute_positions

    pos = compute_positions(ForwardMode.EXTEND, seq_lens=[6, 6], extend_prefix_lens=[0, 3])
    assert pos.tolist() == [0, 1, 2, 3, 4, 5, 3, 4, 5]
    assert compute_positions(ForwardMode.DECODE, seq_lens=[7, 7]).tolist() == [6, 6]
