"""The CPU graph (model_executor/cpu_graph_runner.py): decode forwards recorded once per batch size and
replayed in one C call, on the default path (bfloat16, GGUF blocks, the C++ kernels).

What it promises:
- a replayed decode round gives the same logits, bit for bit, as the forward run layer by layer, and leaves
  the same K and V in the pool;
- a graph holds nothing but kernel calls: one decode layer's, thirty times, plus the embedding and logits;
- an op of the decode forward without a kernel is caught by the check, and the graph turns itself off;
- speculative decoding's verify rows are computed exactly as the decode rows they stand for (attention reads
  each as a decode query of its own), and its TARGET_VERIFY forwards are replayed too, with the same tokens;
- where it cannot run (float32's torch products, the flag), it says why and the forward is the ordinary one.
"""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from minisgl import kernels
from minisgl.model_executor.forward_batch_info import ForwardBatch, ForwardMode
from minisgl.model_executor.model_runner import ModelRunner
from minisgl.model_executor.static_generate import decode, extend
from minisgl.server_args import ServerArgs

pytestmark = pytest.mark.skipif(not kernels.load(), reason="the C++ cpu kernels did not build here")


def _args(**flags) -> ServerArgs:
    return ServerArgs(dtype="bfloat16", max_total_tokens=1024, max_running_requests=8, **flags)


@pytest.fixture(scope="module")
def graph_runner(bundled_source, model_config):
    runner = ModelRunner(model_config, bundled_source, _args())
    assert runner.graph_runner is not None, "the default path should replay its decode forwards"
    return runner


def _layer_by_layer(graph_runner, bundled_source, model_config, **flags) -> ModelRunner:
    """A runner of its own (modules, pools) on the same loaded weights, without the graph."""
    runner = ModelRunner(model_config, bundled_source, _args(disable_cpu_graph=True, **flags),
                         model=graph_runner.model)
    assert runner.graph_runner is None
    return runner


def _decode_logits(runner: ModelRunner, prompts: list[list[int]], rounds: int) -> tuple[list[torch.Tensor], list]:
    """Greedy decode rounds after one EXTEND; every round's logits, and the KV rows the rounds wrote."""
    idxs = runner.req_to_token_pool.alloc(len(prompts))
    logits, loc = extend(runner, idxs, prompts, [0] * len(prompts))
    taken, out = [loc], []
    last = runner.sample_greedy(logits).tolist()
    seq_lens = [len(p) for p in prompts]
    for _ in range(rounds):
        seq_lens = [s + 1 for s in seq_lens]
        logits, loc = decode(runner, idxs, last, seq_lens)
        taken.append(loc)
        out.append(logits)
        last = runner.sample_greedy(logits).tolist()
    pool = runner.token_to_kv_pool
    slots = torch.cat(taken[1:])
    kv = [(pool.k_buffer[i][slots].clone(), pool.v_buffer[i][slots].clone()) for i in range(pool.num_layers)]
    pool.free(torch.cat(taken))
    runner.req_to_token_pool.free(idxs)
    return out, kv


def test_replayed_rounds_equal_the_layer_by_layer_forward(graph_runner, bundled_source, model_config,
                                                          chat_prompt_ids):
    plain = _layer_by_layer(graph_runner, bundled_source, model_config)
    before = graph_runner.graph_runner.replays
    for prompts in ([chat_prompt_ids[0]], chat_prompt_ids[1:4]):  # batch sizes 1 and 3
        replayed, kv_replayed = _decode_logits(graph_runner, prompts, 6)
        ordinary, kv_ordinary = _decode_logits(plain, prompts, 6)
        for r, (a, b) in enumerate(zip(replayed, ordinary)):
            assert a.dtype == torch.float32 and torch.equal(a, b), f"batch {len(prompts)}, round {r}"
        for layer, ((ka, va), (kb, vb)) in enumerate(zip(kv_replayed, kv_ordinary)):
            assert torch.equal(ka, kb) and torch.equal(va, vb), f"layer {layer}'s K/V"
    runs = graph_runner.graph_runner
    assert runs.disabled_reason is None
    assert {bs for _, bs, _ in runs.graphs} >= {1, 3} and all(g.checked for g in runs.graphs.values())
    assert runs.replays - before == 2 * 5  # per batch size: round 1 recorded, rounds 2-6 replayed
    one, three = (runs._own_bytes(runs.graphs["DECODE", bs, torch.get_num_threads()]) for bs in (1, 3))
    assert 0 < one < 2 * 2**20 and 2.5 * one < three < 3.5 * one  # activations only: about 0.7 MiB a row
    assert runs.memory_bytes() >= one + three


def test_a_graph_is_one_decode_layers_kernels_thirty_times(graph_runner, chat_prompt_ids, model_config):
    _decode_logits(graph_runner, [chat_prompt_ids[0]], 1)
    graph = graph_runner.graph_runner.graphs["DECODE", 1, torch.get_num_threads()].graph
    layers = model_config.num_hidden_layers
    # the norms: the first layer's input norm has no residual yet (rms_norm); every later one adds it, the
    # final norm included: 2 per layer in all
    per_layer = {"fused_add_rms_norm": 2, "q4_linear": 4, "rotary_embedding": 1, "kv_write": 2,
                 "decode_attention": 1, "silu_and_mul": 1}
    want = Counter({name: n * layers for name, n in per_layer.items()})
    want.update({"q8_0_embedding": 1, "rms_norm": 1, "q8_0_linear": 1, "bf16_to_f32": 1})
    assert Counter(graph.kernel_names()) == want
    names = graph.kernel_names()
    assert names[0] == "q8_0_embedding" and names[-2:] == ["q8_0_linear", "bf16_to_f32"]


def test_products_on_the_gemm_path_are_replayed_as_torch_steps(graph_runner, bundled_source, model_config,
                                                               chat_prompt_ids):
    """A batch at or above a product's --dequant-gemm-rows: its products dequantize and run oneDNN's GEMM, a
    torch step the graph records between its kernel calls and replays; the rounds stay bit for bit."""
    from minisgl.kernels import dequant_gemm

    products = dequant_gemm.model_products(graph_runner.model)
    before = {name: ps[0].gemm_rows for name, ps in products.items()}
    try:
        dequant_gemm.choose(products, "3")  # shared weights: every runner below multiplies this way
        stepped = ModelRunner(model_config, bundled_source, _args(), model=graph_runner.model)
        plain = _layer_by_layer(graph_runner, bundled_source, model_config)
        replayed, kv_replayed = _decode_logits(stepped, chat_prompt_ids[1:4], 4)
        ordinary, kv_ordinary = _decode_logits(plain, chat_prompt_ids[1:4], 4)
    finally:
        for name, ps in products.items():
            for p in ps:
                p.gemm_rows = before[name]
    assert all(torch.equal(a, b) for a, b in zip(replayed, ordinary))
    assert all(torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) for a, b in zip(kv_replayed, kv_ordinary))
    runs = stepped.graph_runner
    assert runs.disabled_reason is None and runs.replays == 3
    graph = runs.graphs["DECODE", 3, torch.get_num_threads()].graph
    assert len(graph.steps) == 4 * model_config.num_hidden_layers + 1  # every product, lm_head included
    assert "q4_linear" not in graph.kernel_names() and "q8_0_linear" not in graph.kernel_names()


def test_an_op_without_a_kernel_turns_the_graph_off(graph_runner, bundled_source, model_config, chat_prompt_ids,
                                                    caplog):
    plain = _layer_by_layer(graph_runner, bundled_source, model_config)
    odd = ModelRunner(model_config, bundled_source, _args(), model=graph_runner.model)
    odd.model.model.layers[3].post_attention_layernorm.use_kernel = False  # torch's RMSNorm: not recorded
    with caplog.at_level("WARNING"):
        got, _ = _decode_logits(odd, [chat_prompt_ids[0]], 4)
    want, _ = _decode_logits(plain, [chat_prompt_ids[0]], 4)
    assert all(torch.equal(a, b) for a, b in zip(got, want))
    assert "no C++ kernel" in odd.graph_runner.disabled_reason and not odd.graph_runner.graphs
    assert "cpu graph off" in caplog.text
    assert odd.graph_runner.replays == 1  # round 2's check, then never again


def test_batches_above_the_cap_run_layer_by_layer(graph_runner, bundled_source, model_config, chat_prompt_ids):
    capped = ModelRunner(model_config, bundled_source, _args(cpu_graph_max_bs=2), model=graph_runner.model)
    _decode_logits(capped, chat_prompt_ids[:3], 3)
    assert not capped.graph_runner.graphs and capped.graph_runner.replays == 0


def test_where_it_cannot_run_it_says_why(graph_runner, bundled_source, model_config, runner_fp32):
    from minisgl.model_executor.cpu_graph_runner import CpuGraphRunner

    assert CpuGraphRunner.why_not(runner_fp32).startswith("the logits are a torch product")
    off = _layer_by_layer(graph_runner, bundled_source, model_config)
    assert CpuGraphRunner.why_not(off) == "--disable-cpu-graph"
    with pytest.raises(ValueError, match="--cpu-graph-max-bs must be at least 1"):
        _args(cpu_graph_max_bs=0).validate()


def test_a_verify_row_is_the_decode_row_it_stands_for(graph_runner, bundled_source, model_config, chat_prompt_ids):
    plain = _layer_by_layer(graph_runner, bundled_source, model_config)
    prompt = chat_prompt_ids[1]
    decoded, _ = _decode_logits(plain, [prompt], 5)  # round r's logits: the token after r + 1 generated ones
    idx = plain.req_to_token_pool.alloc(1)
    prefill, loc = extend(plain, idx, [prompt], [0])
    tokens = [int(prefill.argmax())] + [int(x.argmax()) for x in decoded]
    # one TARGET_VERIFY round: the first generated token and, as drafts, the next four (all right)
    slots = plain.token_to_kv_pool.alloc(5)
    seq = len(prompt) + 1
    plain.req_to_token_pool.req_to_token[idx[0], seq - 1: seq + 4] = slots

    class Verify:  # the fields ForwardBatch.init_new reads off a ScheduleBatch
        forward_mode, input_ids, out_cache_loc, req_pool_indices = ForwardMode.TARGET_VERIFY, tokens[:5], slots, idx
        seq_lens, prefix_lens, extend_lens = [seq + 4], [seq - 1], [5]

    verified = plain.forward(ForwardBatch.init_new(Verify, plain))
    plain.token_to_kv_pool.free(torch.cat([loc, slots]))
    plain.req_to_token_pool.free(idx)
    assert verified.shape[0] == 5
    for j in range(5):
        assert torch.equal(verified[j], decoded[j][0]), f"verify row {j}"


def test_verify_forwards_are_replayed_with_the_same_tokens():
    import minisgl

    engine = minisgl.Engine(max_total_tokens=1024, max_running_requests=2, speculative_algorithm="NGRAM")
    plain = engine.fork(disable_cpu_graph=True)
    prompt = "Monday, Tuesday, Wednesday, Thursday, Friday. Monday, Tuesday, Wednesday, Thursday, Friday. Monday,"
    greedy = {"max_new_tokens": 40, "temperature": 0, "ignore_eos": True}
    try:
        got = [engine.generate(prompt, greedy)["output_ids"] for _ in range(3)]
        want = plain.generate(prompt, greedy)["output_ids"]
        runs = engine.model_runner.graph_runner
        verify = [g for key, g in runs.graphs.items() if key[0] == "TARGET_VERIFY"]
        assert got == [want] * 3 and runs.disabled_reason is None
        assert verify and all(g.checked for g in verify) and runs.replays > 0
        assert engine.scheduler.model_worker.stats.accepted > 0
    finally:
        plain.shutdown()
        engine.shutdown()
