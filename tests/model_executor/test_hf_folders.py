"""Hugging Face folders (Qwen2, Qwen3, Llama with biases) built here with random weights: the engine's
EXTEND and DECODE logits and greedy tokens must match transformers' own model on the same folder.

Every parameter is re-drawn at random (norm weights and biases included, which transformers would
initialise to ones and zeros), so a weight that is loaded into the wrong place, or not at all, shows.
"""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file, save_file

from minisgl.configs.model_config import ModelConfig, UnsupportedModel
from minisgl.model_executor.model_runner import ModelRunner
from minisgl.model_executor.static_generate import decode, extend, greedy_generate
from minisgl.model_loader.loader import load_model_config, resolve_model
from minisgl.server_args import ServerArgs

TOLERANCE = 1e-4  # float32 on both sides: max absolute difference of logits
MAX_TOTAL_TOKENS = 256
MAX_RUNNING_REQUESTS = 4
PROMPT_LENS = [5, 13, 9]  # different lengths in one batch
DECODE_STEPS = 4
NEW_TOKENS = 8
EOS_IDS = [7, 11]  # generation_config.json's, unlike config.json's

TINY = dict(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    vocab_size=256,
    max_position_embeddings=256,
    rope_theta=50000.0,  # not the default, so a rope theta that is not read shows
    rms_norm_eps=1e-6,
)


def _hf_model(arch: str):
    import transformers as tf

    classes = {
        "qwen2": (tf.Qwen2Config, tf.Qwen2ForCausalLM, dict(tie_word_embeddings=False)),
        "qwen3": (tf.Qwen3Config, tf.Qwen3ForCausalLM, dict(tie_word_embeddings=True)),
        "llama": (tf.LlamaConfig, tf.LlamaForCausalLM, dict(tie_word_embeddings=False, attention_bias=True)),
    }
    config_cls, model_cls, extra = classes[arch]
    torch.manual_seed(0)
    model = model_cls(config_cls(**TINY, **extra)).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1 + 0.1 * torch.randn_like(p))
            else:
                p.copy_(0.1 * torch.randn_like(p))
    return model


@pytest.fixture(scope="module", params=["qwen2", "qwen3", "llama"])
def case(request, tmp_path_factory):
    """(arch, folder, transformers model, engine config, engine runner) for one tiny model."""
    arch = request.param
    hf = _hf_model(arch)
    hf.generation_config.eos_token_id = EOS_IDS
    folder = tmp_path_factory.mktemp(arch)
    hf.save_pretrained(folder, safe_serialization=True)
    # the reference runs every request the full length
    hf.generation_config.eos_token_id = None
    hf.generation_config.pad_token_id = 0
    src = resolve_model(str(folder))
    config = load_model_config(src)
    runner = ModelRunner(config, src, ServerArgs(dtype="float32", max_total_tokens=MAX_TOTAL_TOKENS,
                                                 max_running_requests=MAX_RUNNING_REQUESTS))
    return arch, folder, hf, config, runner


@pytest.fixture(scope="module")
def prompts():
    g = torch.Generator().manual_seed(1)
    return [torch.randint(0, TINY["vocab_size"], (n,), generator=g).tolist() for n in PROMPT_LENS]


def hf_last_logits(hf, ids: list[int]) -> torch.Tensor:
    with torch.inference_mode():
        return hf(torch.tensor([ids])).logits[0, -1].float()


def test_config_facts(case):
    arch, folder, hf, config, runner = case
    assert runner.model_config is config
    assert config.architecture == type(hf).__name__
    assert config.rope_theta == TINY["rope_theta"]  # transformers 5.x writes it under rope_parameters
    assert config.rope_scaling is None
    assert config.eos_token_ids == EOS_IDS
    assert json.loads((folder / "config.json").read_text()).get("eos_token_id") != EOS_IDS
    assert (config.head_dim, config.num_key_value_heads, config.vocab_size) == (16, 2, 256)
    assert config.qk_norm == (arch == "qwen3")
    assert config.attention_bias == (arch in ("qwen2", "llama"))
    assert config.tie_word_embeddings == (arch == "qwen3")
    assert (runner.model.lm_head is None) == config.tie_word_embeddings


def test_rope_theta_read_from_top_level_or_rope_parameters(tmp_path):
    """transformers 4.x writes `rope_theta`; 5.x writes `rope_parameters: {rope_theta, rope_type}`."""
    base = dict(TINY, architectures=["LlamaForCausalLM"])
    del base["rope_theta"]
    v5 = {"rope_parameters": {"rope_theta": 1234.0, "rope_type": "default"}}
    for extra in ({"rope_theta": 1234.0}, v5):
        (tmp_path / "config.json").write_text(json.dumps({**base, **extra}))
        config = ModelConfig.from_hf_folder(tmp_path)
        assert config.rope_theta == 1234.0
        assert config.rope_scaling is None
    scaled = {"rope_theta": 1234.0, "rope_type": "linear", "factor": 2.0}
    (tmp_path / "config.json").write_text(json.dumps({**base, "rope_parameters": scaled}))
    config = ModelConfig.from_hf_folder(tmp_path)
    assert config.rope_theta == 1234.0 and config.rope_scaling["factor"] == 2.0


def test_extend_then_decode_logits_match_transformers(case, prompts):
    _, _, hf, _, r = case
    idxs = r.req_to_token_pool.alloc(len(prompts))
    taken = []
    try:
        logits, loc = extend(r, idxs, prompts, [0] * len(prompts))
        taken.append(loc)
        assert logits.shape == (len(prompts), TINY["vocab_size"])
        seqs = [list(p) for p in prompts]
        for step in range(DECODE_STEPS + 1):
            for i, seq in enumerate(seqs):
                ref = hf_last_logits(hf, seq)
                diff = (logits[i] - ref).abs().max().item()
                assert diff < TOLERANCE, f"step {step}, request {i}: max |diff| {diff:.2e}"
            if step == DECODE_STEPS:
                break
            for seq, t in zip(seqs, logits.argmax(-1).tolist()):
                seq.append(t)
            logits, loc = decode(r, idxs, [s[-1] for s in seqs], [len(s) for s in seqs])
            taken.append(loc)
    finally:
        r.token_to_kv_pool.free(torch.cat(taken))
        r.req_to_token_pool.free(idxs)


def test_greedy_generate_matches_transformers_generate(case, prompts):
    _, _, hf, _, r = case
    expected = []
    for p in prompts:
        ids = torch.tensor([p])
        with torch.inference_mode():
            out = hf.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=NEW_TOKENS,
                              do_sample=False)
        expected.append(out[0, len(p):].tolist())
    assert greedy_generate(r, prompts, NEW_TOKENS) == expected
    assert r.token_to_kv_pool.available_size() == r.token_to_kv_pool.size
    assert r.req_to_token_pool.available_size() == r.req_to_token_pool.size


# ---- pool sizing ----------------------------------------------------------------------------------------


def test_pools_sized_from_max_total_tokens_and_max_running_requests(case):
    _, _, _, config, r = case
    kv, req = r.token_to_kv_pool, r.req_to_token_pool
    assert r.max_total_num_tokens == kv.size == MAX_TOTAL_TOKENS
    assert kv.available_size() == MAX_TOTAL_TOKENS
    assert len(kv.k_buffer) == len(kv.v_buffer) == config.num_hidden_layers
    # one more row than slots: slot 0 is the padding slot, never handed out
    assert kv.k_buffer[0].shape == (MAX_TOTAL_TOKENS + 1, config.num_key_value_heads, config.head_dim)
    assert kv.k_buffer[0].dtype == torch.float32
    assert req.size == req.available_size() == MAX_RUNNING_REQUESTS
    assert req.req_to_token.shape == (MAX_RUNNING_REQUESTS, config.context_len)


def test_pool_size_derived_from_mem_fraction_static(case):
    _, folder, _, config, _ = case
    src = resolve_model(str(folder))
    r = ModelRunner(config, src, ServerArgs(dtype="float32", max_total_tokens=None, max_running_requests=2,
                                            mem_fraction_static=0.01))
    size = r.token_to_kv_pool.size
    assert 0 < size <= 2 * config.context_len  # capped: no more slots than the requests could ever use
    assert r.max_total_num_tokens == size == r.token_to_kv_pool.available_size()
    assert r.req_to_token_pool.size == 2


# ---- checkpoints that do not fit the model ---------------------------------------------------------------


def test_missing_unexpected_or_misshapen_weight_is_a_clear_error(tmp_path):
    _hf_model("qwen2").save_pretrained(tmp_path, safe_serialization=True)
    (f,) = tmp_path.glob("*.safetensors")
    good = load_file(str(f))
    layer = "model.layers.0."
    cases = [
        # one part of the fused q/k/v projection missing: its rows would be left uninitialised
        ({layer + "self_attn.v_proj.weight": None}, r"missing.*'model\.layers\.0\.self_attn\.v_proj\.weight"),
        ({layer + "mlp.gate_proj.bias": torch.zeros(128)}, r"unexpected weight 'model\.layers\.0\.mlp\.gate_"),
        ({"model.norm.weight": torch.ones(32)}, r"'model\.norm\.weight' has shape \[32\], expected \[64\]"),
        ({layer + "self_attn.k_proj.weight": torch.ones(16, 64)}, r"k_proj\.weight' has shape \[16, 64\]"),
    ]
    for edit, message in cases:
        weights = {k: v for k, v in {**good, **edit}.items() if v is not None}
        save_file(weights, str(f), metadata={"format": "pt"})
        with pytest.raises(UnsupportedModel, match=message):
            src = resolve_model(str(tmp_path))
            ModelRunner(load_model_config(src), src, ServerArgs(dtype="float32", max_total_tokens=16,
                                                                max_running_requests=1))
