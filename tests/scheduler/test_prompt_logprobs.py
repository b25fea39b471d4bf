"""Prompt logprobs (SGLang's logprob_start_len, input_token_logprobs) against the outside referee:
transformers' log_softmax of the same prompt in float32, within 2e-3, with the prompt prefilled whole, in
chunks, and after it is in the radix cache (such a prompt matches no prefix: every row's logits are
needed); the top ones at each position too."""

from __future__ import annotations

import pytest
import torch

PROMPT = "The quick brown fox jumps over the lazy dog because it wanted to see the river"


@pytest.fixture(scope="module")
def reference(hf_model_fp32, base_engine):
    ids = base_engine.tokenizer.encode(PROMPT)
    with torch.inference_mode():
        logits = hf_model_fp32(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids))).logits[0]
    return ids, torch.log_softmax(logits.float(), dim=-1)


@pytest.mark.parametrize("chunk", [-1, 5])
def test_prompt_logprobs_equal_transformers(base_engine, reference, chunk):
    ids, logprobs = reference
    engine = base_engine.fork(chunked_prefill_size=chunk)
    for start in (0, 4, 0):  # the last run finds the prompt cached and still computes every row
        out = engine.generate(input_ids=ids, sampling_params={"max_new_tokens": 2, "temperature": 0},
                              return_logprob=True, top_logprobs_num=3, logprob_start_len=start)
        got, tops = out["input_token_logprobs"], out["input_top_logprobs"]
        assert [tid for _, tid, _ in got] == ids[start:]
        first = max(start, 1)
        if start == 0:
            assert got[0][0] is None and tops[0] is None
            got, tops = got[1:], tops[1:]
        for k, (value, tid, _), top in zip(range(first, len(ids)), got, tops):
            assert value == pytest.approx(logprobs[k - 1, tid].item(), abs=2e-3)
            best = logprobs[k - 1].topk(3)
            assert [t for _, t, _ in top] == best.indices.tolist()
            assert [v for v, _, _ in top] == pytest.approx(best.values.tolist(), abs=2e-3)
        assert out["usage"]["cached_tokens"] == 0
    plain = engine.generate(input_ids=ids, sampling_params={"max_new_tokens": 2, "temperature": 0})
    assert plain["output_ids"] == out["output_ids"] and plain["usage"]["cached_tokens"] == len(ids) - 1
