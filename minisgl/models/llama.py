"""Llama-family decoder (Llama, Qwen2, Qwen3), written for the engine's ForwardBatch.

Rows of every request in the batch are flattened into one [num_rows, hidden] tensor; attention is
the only place that needs to know which row belongs to which request.
"""

from __future__ import annotations

from typing import Iterable

import torch
from torch import nn

from minisgl.configs.model_config import ModelConfig, UnsupportedModel
from minisgl.distributed.parallel_state import divide, get_tensor_model_parallel_world_size
from minisgl.layers.activation import SiluAndMul
from minisgl.layers.layernorm import RMSNorm
from minisgl.layers.linear import (
    Linear,
    MergedColumnParallelLinear,
    QKVParallelLinear,
    RowParallelLinear,
    pack_linear_weights,
    pack_weight_for_rows,
)
from minisgl.layers.logits_processor import LogitsProcessor
from minisgl.layers.radix_attention import RadixAttention
from minisgl.layers.rotary_embedding import RotaryEmbedding, apply_rotary_emb
from minisgl.layers.vocab_parallel_embedding import ParallelLMHead, VocabParallelEmbedding
from minisgl.model_executor.forward_batch_info import ForwardBatch


class LlamaAttention(nn.Module):
    def __init__(self, config: ModelConfig, layer_id: int):
        super().__init__()
        tp_size = get_tensor_model_parallel_world_size()  # this rank's heads: 1/tp_size of each kind
        self.num_heads = divide(config.num_attention_heads, tp_size, "attention heads")
        self.num_kv_heads = divide(config.num_key_value_heads, tp_size, "key/value heads")
        self.head_dim = config.head_dim
        self.q_size = self.num_heads * self.head_dim
        self.kv_size = self.num_kv_heads * self.head_dim
        # q, k and v share one matmul: the fused weight is [q_size + 2 * kv_size, hidden]
        self.qkv_proj = QKVParallelLinear(config.hidden_size, self.head_dim, config.num_attention_heads,
                                          config.num_key_value_heads, bias=config.attention_bias)
        self.o_proj = RowParallelLinear(config.num_attention_heads * self.head_dim, config.hidden_size,
                                        bias=config.o_proj_bias)
        if config.qk_norm:
            self.q_norm = RMSNorm(self.head_dim, config.rms_norm_eps)
            self.k_norm = RMSNorm(self.head_dim, config.rms_norm_eps)
        else:
            self.q_norm = self.k_norm = None
        self.attn = RadixAttention(self.num_heads, self.head_dim, self.head_dim**-0.5, self.num_kv_heads,
                                   layer_id)

    def forward(self, angles, hidden: torch.Tensor, forward_batch: ForwardBatch) -> torch.Tensor:
        q, k, v = self.qkv_proj(hidden).split([self.q_size, self.kv_size, self.kv_size], dim=-1)
        q = q.reshape(-1, self.num_heads, self.head_dim)
        k = k.reshape(-1, self.num_kv_heads, self.head_dim)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = apply_rotary_emb(q, k, angles)
        out = self.attn(q.flatten(1), k.flatten(1), v, forward_batch)
        return self.o_proj(out)


class LlamaMLP(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.gate_up_proj = MergedColumnParallelLinear(config.hidden_size, [config.intermediate_size] * 2,
                                                       bias=False)
        self.down_proj = RowParallelLinear(config.intermediate_size, config.hidden_size, bias=False)
        self.act_fn = SiluAndMul()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(self.act_fn(self.gate_up_proj(x)))


class LlamaDecoderLayer(nn.Module):
    def __init__(self, config: ModelConfig, layer_id: int):
        super().__init__()
        self.self_attn = LlamaAttention(config, layer_id)
        self.mlp = LlamaMLP(config)
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)

    def forward(self, angles, hidden, residual, forward_batch):
        """The residual stream is carried beside the layer's output; each norm first adds the two."""
        if residual is None:
            residual, hidden = hidden, self.input_layernorm(hidden)
        else:
            hidden, residual = self.input_layernorm(hidden, residual)
        hidden = self.self_attn(angles, hidden, forward_batch)
        hidden, residual = self.post_attention_layernorm(hidden, residual)
        return self.mlp(hidden), residual


class LlamaModel(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.embed_tokens = VocabParallelEmbedding(config.vocab_size, config.hidden_size)
        self.rotary_emb = RotaryEmbedding(config.head_dim, config.max_position_embeddings, config.rope_theta,
                                          config.rope_scaling)
        self.layers = nn.ModuleList(LlamaDecoderLayer(config, i) for i in range(config.num_hidden_layers))
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)

    def forward(self, input_ids, positions, forward_batch):
        hidden = self.embed_tokens(input_ids)
        angles = self.rotary_emb(positions, hidden.dtype)  # by logical position, shared by all layers
        residual = None
        for layer in self.layers:
            hidden, residual = layer(angles, hidden, residual, forward_batch)
        hidden, _ = self.norm(hidden, residual)
        return hidden


class LlamaForCausalLM(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        self.model = LlamaModel(config)
        # tied: the embedding matrix doubles as the output projection (the checkpoint has no lm_head).
        # Only a weight holder: the logits processor computes (and packs) the product.
        self.lm_head = (None if config.tie_word_embeddings
                        else ParallelLMHead(config.vocab_size, config.hidden_size))
        self.logits_processor = LogitsProcessor(config.vocab_size)

    @torch.inference_mode()
    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor,
                forward_batch: ForwardBatch) -> torch.Tensor:
        hidden = self.model(input_ids, positions, forward_batch)
        return self.logits_processor(hidden, self.lm_head_weight(), forward_batch)

    def lm_head_weight(self) -> torch.Tensor | None:
        """None where the logits processor multiplies by quantized blocks instead (--quantization gguf)."""
        head = self.model.embed_tokens if self.lm_head is None else self.lm_head
        return getattr(head, "weight", None)

    def pack_weights(self) -> int:
        """Pack every projection, lm_head included, for oneDNN (see layers/linear.py); returns the count."""
        count = pack_linear_weights(self)
        return count + self.logits_processor.pack(self.lm_head_weight())

    def verify_view(self, rows: int) -> LlamaForCausalLM | None:
        """The same weights through new module objects whose products run oneDNN's path tuned for `rows`
        rows (float32 only; layers/linear.py): what ModelRunner runs speculative verify forwards on. None
        where the path is missing."""
        from minisgl.model_executor.model_runner import share_modules

        view = share_modules(self)
        layers = [m for m in view.modules() if isinstance(m, Linear)]
        packed = [pack_weight_for_rows(m.weight, rows) for m in layers]
        head = pack_weight_for_rows(self.lm_head_weight(), rows)
        if (head is None or any(p is None for p in packed)
                or view.logits_processor.quantized_lm_head is not None):
            return None
        for m, p in zip(layers, packed):
            m.packed_weight = p
        view.logits_processor.packed_lm_head = head
        return view

    # Hugging Face checkpoint names -> (fused parameter, which shard)
    _stacked = (("qkv_proj", "q_proj", "q"), ("qkv_proj", "k_proj", "k"), ("qkv_proj", "v_proj", "v"),
                ("gate_up_proj", "gate_proj", 0), ("gate_up_proj", "up_proj", 1))

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        params = dict(self.named_parameters())
        loaded: set[str] = set()
        for name, w in weights:
            if "rotary_emb" in name:
                continue
            if name == "lm_head.weight" and self.lm_head is None:
                continue
            for fused, part, shard in self._stacked:
                if f".{part}." in name:
                    target = name.replace(part, fused)
                    self._copy(params, target, w, name, shard)
                    break
            else:
                self._copy(params, name, w, name)
            loaded.add(name)
        missing = sorted({c for n in params for c in self.checkpoint_names(n)} - loaded)
        if missing:
            raise UnsupportedModel(f"weights missing from checkpoint: {missing[:5]}")

    def checkpoint_names(self, param_name: str) -> list[str]:
        """The checkpoint weights that fill one parameter: all parts of a fused one."""
        parts = [param_name.replace(f, p) for f, p, _ in self._stacked if f".{f}." in param_name]
        return parts or [param_name]

    def _shard_range(self, shard_id) -> tuple[int, int]:
        attn = self.model.layers[0].self_attn
        sizes = ([attn.q_size, attn.kv_size, attn.kv_size] if shard_id in ("q", "k", "v")
                 else [self.config.intermediate_size] * 2)
        shard = "qkv".index(shard_id) if isinstance(shard_id, str) else shard_id
        start = sum(sizes[:shard])
        return start, start + sizes[shard]

    def _copy(self, params: dict, target: str, w: torch.Tensor, name: str, shard_id=None) -> None:
        """Fill one parameter (or one shard of a fused one) with this rank's slice of checkpoint weight
        `w`."""
        if target not in params:
            raise UnsupportedModel(f"unexpected weight {name!r} in checkpoint for {self.config.architecture}")
        param = params[target]
        module = self.get_submodule(target.rpartition(".")[0])
        loader = getattr(module, "weight_loader", None)
        with torch.no_grad():
            if loader is None:  # a norm (every rank holds all of it), or a quantized layer's bias (one rank)
                if shard_id is not None:
                    param = param[slice(*self._shard_range(shard_id))]
                if param.shape != w.shape:
                    raise UnsupportedModel(f"weight {name!r} has shape {list(w.shape)}, expected "
                                           f"{list(param.shape)}")
                param.copy_(w)
                return
            try:
                loader(param, w, shard_id)
            except ValueError as e:  # loaders say which whole shape they expected
                raise UnsupportedModel(f"weight {name!r} has shape {list(w.shape)}, {e}") from None
