"""ModelConfig: the handful of architecture facts the engine needs, read from a GGUF header or config.json."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SUPPORTED_ARCHITECTURES = ("LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM")


class UnsupportedModel(RuntimeError):
    """The model exists but is not an architecture this engine implements."""


@dataclass
class ModelConfig:
    architecture: str
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    rms_norm_eps: float
    rope_theta: float
    max_position_embeddings: int
    tie_word_embeddings: bool
    attention_bias: bool = False  # biases on q_proj, k_proj, v_proj
    o_proj_bias: bool = False  # a bias on o_proj too (Llama's and Qwen3's attention_bias; never Qwen2)
    qk_norm: bool = False
    rope_scaling: dict[str, Any] | None = None
    eos_token_ids: list[int] = field(default_factory=list)

    @property
    def context_len(self) -> int:
        return self.max_position_embeddings

    @classmethod
    def from_gguf_fields(cls, fields: dict[str, Any], vocab_size: int,
                         has_output_weight: bool) -> ModelConfig:
        arch = fields.get("general.architecture")
        if arch != "llama":
            raise UnsupportedModel(
                f"GGUF architecture {arch!r} is not supported: expected 'llama' "
                f"(or a Hugging Face folder of {', '.join(SUPPORTED_ARCHITECTURES)})"
            )
        n_heads = int(fields["llama.attention.head_count"])
        hidden = int(fields["llama.embedding_length"])
        eos = fields.get("tokenizer.ggml.eos_token_id")
        return cls(
            architecture="LlamaForCausalLM",
            hidden_size=hidden,
            num_hidden_layers=int(fields["llama.block_count"]),
            num_attention_heads=n_heads,
            num_key_value_heads=int(fields.get("llama.attention.head_count_kv", n_heads)),
            head_dim=int(fields.get("llama.rope.dimension_count", hidden // n_heads)),
            intermediate_size=int(fields["llama.feed_forward_length"]),
            vocab_size=vocab_size,
            rms_norm_eps=float(fields.get("llama.attention.layer_norm_rms_epsilon", 1e-5)),
            rope_theta=float(fields.get("llama.rope.freq_base", 10000.0)),
            max_position_embeddings=int(fields.get("llama.context_length", 2048)),
            tie_word_embeddings=not has_output_weight,
            eos_token_ids=[int(eos)] if eos is not None else [],
        )

    @classmethod
    def from_hf_folder(cls, folder: Path) -> ModelConfig:
        cfg = _read_json(folder / "config.json")
        archs = cfg.get("architectures") or []
        arch = next((a for a in archs if a in SUPPORTED_ARCHITECTURES), None)
        if arch is None:
            raise UnsupportedModel(
                f"{folder}: architecture {archs or 'unknown'} is not supported; expected one of "
                f"{', '.join(SUPPORTED_ARCHITECTURES)}"
            )
        try:
            return cls._from_hf_dict(folder, arch, cfg)
        except KeyError as e:
            raise UnsupportedModel(f"{folder / 'config.json'} has no {e.args[0]!r}, which {arch} "
                                   "needs") from None

    @classmethod
    def _from_hf_dict(cls, folder: Path, arch: str, cfg: dict[str, Any]) -> ModelConfig:
        n_heads = cfg["num_attention_heads"]
        # transformers 4.x writes rope_theta (and rope_scaling) at the top; 5.x puts both in rope_parameters
        rope = cfg.get("rope_parameters") or {}
        rope_theta = cfg.get("rope_theta") or rope.get("rope_theta") or 10000.0
        rope_scaling = cfg.get("rope_scaling")
        if rope_scaling is None and rope.get("rope_type", "default") != "default":
            rope_scaling = rope
        attention_bias = bool(cfg.get("attention_bias", False))
        return cls(
            architecture=arch,
            hidden_size=cfg["hidden_size"],
            num_hidden_layers=cfg["num_hidden_layers"],
            num_attention_heads=n_heads,
            num_key_value_heads=cfg.get("num_key_value_heads") or n_heads,
            head_dim=cfg.get("head_dim") or cfg["hidden_size"] // n_heads,
            intermediate_size=cfg["intermediate_size"],
            vocab_size=cfg["vocab_size"],
            rms_norm_eps=cfg.get("rms_norm_eps", 1e-6),
            rope_theta=float(rope_theta),
            max_position_embeddings=cfg.get("max_position_embeddings", 2048),
            tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
            attention_bias=arch == "Qwen2ForCausalLM" or attention_bias,
            o_proj_bias=attention_bias,
            qk_norm=arch == "Qwen3ForCausalLM",
            rope_scaling=rope_scaling,
            eos_token_ids=_hf_eos_ids(folder, cfg),
        )


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise UnsupportedModel(f"{path} is not a readable JSON file ({e})") from None
    if not isinstance(data, dict):
        raise UnsupportedModel(f"{path} holds a {type(data).__name__}, not a JSON object")
    return data


def _hf_eos_ids(folder: Path, cfg: dict) -> list[int]:
    eos: Any = None
    gen = folder / "generation_config.json"
    if gen.exists():
        eos = _read_json(gen).get("eos_token_id")
    if eos is None:
        eos = cfg.get("eos_token_id")
    if eos is None:
        return []
    return [int(e) for e in eos] if isinstance(eos, list) else [int(eos)]
