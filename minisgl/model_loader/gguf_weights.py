"""Read a llama.cpp GGUF file: metadata into ModelConfig, tensors dequantized under Hugging Face names."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

import numpy as np

from minisgl.configs.model_config import ModelConfig, UnsupportedModel
from minisgl.model_loader.bundled import ModelNotFound
from minisgl.model_loader.gguf_file import GGUFError, GGUFFile

if TYPE_CHECKING:
    import torch

_LAYER_NAMES = {
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
_TOP_NAMES = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}
_QUANTIZABLE_TOP = ("model.embed_tokens.weight", "lm_head.weight")
_BLOCK = re.compile(r"blk\.(\d+)\.(\w+)\.(weight|bias)")


def _reader(path: Path) -> GGUFFile:
    try:
        return GGUFFile(path, read_strings=False)  # the tokenizer's arrays: tokenizer_cache.py's business
    except (GGUFError, OSError, ValueError) as e:  # bad magic, a short read, an empty file, ...
        raise ModelNotFound(f"{path} is not a readable GGUF file ({type(e).__name__}: {e})") from e


def read_gguf_config(path: Path) -> ModelConfig:
    reader = _reader(path)
    wanted = ("general.", "llama.", "tokenizer.ggml.eos_token_id")
    fields = {k: v for k, v in reader.fields.items() if k.startswith(wanted)}
    names = {t.name: t for t in reader.tensors}
    try:
        vocab = int(names["token_embd.weight"].shape[-1])
        return ModelConfig.from_gguf_fields(fields, vocab_size=vocab,
                                            has_output_weight="output.weight" in names)
    except KeyError as e:  # a tensor or metadata field that a llama GGUF always has
        raise UnsupportedModel(f"{path}: not a complete llama GGUF model, it has no {e.args[0]!r}") from None


def hf_name(gguf_name: str) -> str | None:
    if gguf_name in _TOP_NAMES:
        return _TOP_NAMES[gguf_name]
    m = _BLOCK.fullmatch(gguf_name)
    if m and m.group(2) in _LAYER_NAMES:
        return f"model.layers.{m.group(1)}.{_LAYER_NAMES[m.group(2)]}.{m.group(3)}"
    return None


def unpermute_rope(w: np.ndarray, n_heads: int) -> np.ndarray:
    """Undo llama.cpp's q/k row permutation (interleaved rope pairs -> rotate-half halves)."""
    d = w.shape[0]
    return w.reshape(n_heads, d // n_heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _in_model_order(name: str, w: np.ndarray, config: ModelConfig) -> np.ndarray:
    """q and k rows as the model expects them (GGUF stores them permuted for llama.cpp's rope)."""
    if name.endswith("q_proj.weight"):
        return unpermute_rope(w, config.num_attention_heads)
    if name.endswith("k_proj.weight"):
        return unpermute_rope(w, config.num_key_value_heads)
    return w


def iter_gguf_weights(path: Path, config: ModelConfig,
                      skip: set[str] | frozenset[str] = frozenset()) -> Iterator[tuple[str, torch.Tensor]]:
    import torch

    from minisgl.model_loader.gguf_dequant import dequantize

    for t in _reader(path).tensors:
        name = hf_name(t.name)
        if name is None or name in skip:
            continue
        w = dequantize(t.data, int(t.tensor_type))
        w = np.array(w, dtype=np.float32).reshape([int(x) for x in reversed(t.shape)])
        w = _in_model_order(name, w, config)
        yield name, torch.from_numpy(np.ascontiguousarray(w))


def read_gguf_linear_blocks(path: Path, config: ModelConfig) -> dict[str, tuple[int, np.ndarray]]:
    """The projections', embedding's and lm_head's weights as stored: Hugging Face name -> (ggml type, rows of
    bytes [N, bytes per row]).

    Rows are put in the model's order (q and k un-permuted, a row of blocks moves as a whole), so a
    quantized layer (layers/quantization/gguf.py) can decode them without dequantizing."""
    out = {}
    for t in _reader(path).tensors:
        name = hf_name(t.name)
        wanted = name is not None and (name.endswith("_proj.weight") or name in _QUANTIZABLE_TOP)
        if not wanted or t.data.dtype != np.uint8:
            continue
        out[name] = (t.tensor_type, _in_model_order(name, t.data.reshape(-1, t.data.shape[-1]), config))
    return out
