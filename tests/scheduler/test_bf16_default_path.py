"""What the default path promises: bfloat16 with the CPU kernels and the GGUF file's quantized blocks kept
(Q4_1 and Q8_0 in the C++ kernels), as `minisgl serve` runs out of the box.

bfloat16 keeps 8 bits of mantissa, so two engines that add the same numbers in another order can pick
different tokens where the two best candidates are nearly tied. The promise, tested here against
transformers' own bfloat16 run on the same weights: greedy tokens are equal up to the first near-tie, and
where they part, each of the two tokens chosen is within NEAR_TIE of float32's best candidate. A near-tie
can hold more than two: on an AVX2-only CPU one parting was among float32's best three, 0.18 apart in all
(the engines' sums, and so their roundings, follow the CPU's vector width).
"""

from __future__ import annotations

import copy

import pytest
import torch

from tests.conftest import NEW_TOKENS

pytestmark = pytest.mark.slow

NEAR_TIE = 0.5  # float32 logits; the partings measured on these prompts were 0.04 to 0.28 below the best
GREEDY = {"max_new_tokens": NEW_TOKENS, "ignore_eos": True, "temperature": 0}


@pytest.fixture(scope="module")
def engine_bf16():
    import minisgl

    engine = minisgl.Engine(
        max_total_tokens=4096
    )  # every default: bfloat16 on the cpu, kernels where they build
    assert engine.model_runner.dtype == torch.bfloat16
    if engine.model_runner.use_cpu_kernels:  # the GGUF file's Q4_1 blocks kept, in the C++ kernel
        from minisgl.layers.quantization.gguf_q4 import GGUFQ4Linear

        assert isinstance(engine.model_runner.model.model.layers[0].mlp.gate_up_proj, GGUFQ4Linear)
    yield engine
    engine.shutdown()


@pytest.fixture(scope="module")
def hf_answers_bf16(hf_model_fp32, chat_prompt_ids):
    """transformers' own bfloat16 run. Its model is the session's float32 one cast to bfloat16, which is what
    from_pretrained(dtype=torch.bfloat16) builds from the GGUF without a second conversion: the same
    dequantized weights cast to bfloat16, and the rotary buffers kept in float32 (transformers computes them
    so); a one-off comparison of the two gave bit-identical logits and greedy tokens."""
    hf = copy.deepcopy(hf_model_fp32).to(torch.bfloat16)
    for name, buf in hf_model_fp32.named_buffers():  # inv_freq, original_inv_freq
        module, attr = name.rsplit(".", 1)
        setattr(hf.get_submodule(module), attr, buf.clone())
    hf.config.dtype = torch.bfloat16
    assert all(p.dtype == torch.bfloat16 for p in hf.parameters())
    assert all(b.dtype == torch.float32 for b in hf.buffers())
    answers = []
    for prompt in chat_prompt_ids:
        ids = torch.tensor([prompt])
        with torch.inference_mode():
            out = hf.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=NEW_TOKENS,
                do_sample=False,
                eos_token_id=None,
                pad_token_id=2,
            )
        answers.append(out[0, len(prompt) :].tolist())
    return answers


def test_bf16_greedy_parts_from_transformers_bf16_only_at_near_ties(
    engine_bf16, hf_answers_bf16, hf_model_fp32, chat_prompt_ids
):
    results = engine_bf16.generate(input_ids=chat_prompt_ids, sampling_params=GREEDY)
    _parts_only_at_near_ties(results, hf_answers_bf16, hf_model_fp32, chat_prompt_ids)


def _parts_only_at_near_ties(results, hf_answers_bf16, hf_model_fp32, chat_prompt_ids) -> None:
    equal = 0
    for prompt, result, theirs in zip(chat_prompt_ids, results, hf_answers_bf16):
        ours = result["output_ids"]
        k = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), None)
        if k is None:
            equal += 1
            continue
        with torch.inference_mode():
            logits = hf_model_fp32(torch.tensor([prompt + ours[:k]])).logits[0, -1].float()
        best = float(logits.max())
        for token in (ours[k], theirs[k]):
            gap = best - float(logits[token])
            assert gap < NEAR_TIE, f"token {k}: {token} is {gap:.3f} below float32's best, not a near-tie"
    assert equal >= 1  # a bf16 path broken outright would part at once on every prompt


def test_two_threads_give_the_one_thread_tokens(engine_bf16, chat_prompt_ids):
    """The tests run torch on one thread; `minisgl serve` runs on all the cores. The kernels split a product's
    columns among the threads (a prefill's products here, and the attention's requests), and each result
    is the one-thread result, so the tokens are too."""
    params = {"max_new_tokens": 8, "temperature": 0}
    prompts = [list(p) for p in chat_prompt_ids[:2]]
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = engine_bf16.generate(input_ids=prompts, sampling_params=params)
        torch.set_num_threads(2)
        two = engine_bf16.generate(input_ids=prompts, sampling_params=params)
    finally:
        torch.set_num_threads(before)
    assert [r["output_ids"] for r in two] == [r["output_ids"] for r in one]
    assert all(len(r["output_ids"]) == 8 for r in one)


def test_each_product_has_its_row_count_and_the_trace_header_says_it(engine_bf16, tmp_path):
    """--dequant-gemm-rows auto (the default): each GGUF product (four per layer and the tied lm_head) has the
    row count from which it dequantizes for oneDNN's GEMM, timed on this machine, and sched.config says so."""
    from minisgl.kernels.dequant_gemm import model_products
    from tracer.reader import load_trace

    runner = engine_bf16.model_runner
    if not runner.use_cpu_kernels:
        pytest.skip("the GGUF blocks run in torch's int4 kernel here")
    chosen = runner.dequant_gemm_rows
    assert set(chosen) == {"qkv_proj", "o_proj", "gate_up_proj", "down_proj", "lm_head"}
    for name, products in model_products(runner.model).items():
        assert {p.gemm_rows for p in products} == {chosen[name]}
        assert chosen[name] is None or chosen[name] >= 1
    traced = engine_bf16.fork(trace_dir=str(tmp_path))
    try:
        traced.generate(input_ids=[[1, 2, 3]], sampling_params={"max_new_tokens": 1})
    finally:
        traced.shutdown()
    config = next(ev for ev in load_trace(tmp_path).events if ev.name == "sched.config")
    assert config.get("dequant_gemm_rows") == chosen


def test_every_product_on_the_gemm_path_still_parts_only_at_near_ties(
    engine_bf16, hf_answers_bf16, hf_model_fp32, chat_prompt_ids
):
    """--dequant-gemm-rows 1: every product dequantizes its blocks (the weights --quantization none
    multiplies with) and runs oneDNN's GEMM; the promise above holds for that path too."""
    from minisgl.kernels import dequant_gemm

    products = dequant_gemm.model_products(engine_bf16.model_runner.model)
    if not products:
        pytest.skip("the GGUF blocks run in torch's int4 kernel here")
    before = {name: ps[0].gemm_rows for name, ps in products.items()}
    try:
        dequant_gemm.choose(products, "1")
        results = engine_bf16.generate(input_ids=chat_prompt_ids, sampling_params=GREEDY)
    finally:
        for name, ps in products.items():
            for p in ps:
                p.gemm_rows = before[name]
    _parts_only_at_near_ties(results, hf_answers_bf16, hf_model_fp32, chat_prompt_ids)
