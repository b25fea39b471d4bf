"""AttentionBackend: how a RadixAttention layer's rows meet the paged KV cache, as in SGLang.

A backend does two things. Once per forward, `init_forward_metadata` prepares what every layer will
need to find each request's history (which KV slots it reads, its mask); then, in each layer,
`forward` writes this round's K/V at `out_cache_loc` and attends: `forward_decode` when every request
brings one row, `forward_extend` otherwise (EXTEND and MIXED rounds).

The write happens here, once, for every backend; the two `forward_*` methods only read the pool (SGLang
leaves the write to each backend). Backends are combined by holding one another (HybridAttnBackend),
never by overriding each other's parts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from minisgl.layers.radix_attention import RadixAttention
    from minisgl.model_executor.forward_batch_info import ForwardBatch


class AttentionBackend:
    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    def init_forward_metadata(self, forward_batch: ForwardBatch) -> None:
        """Work shared by all layers of one forward pass."""
        raise NotImplementedError

    def handles_as_decode(self, forward_batch: ForwardBatch) -> bool:
        """Whether this backend, as the decode half of a HybridAttnBackend, takes this forward: DECODE
        rounds (CpuPagedAttnBackend also takes TARGET_VERIFY rows, each as a decode query)."""
        return forward_batch.forward_mode.is_decode()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layer: RadixAttention,
                forward_batch: ForwardBatch) -> torch.Tensor:
        """q: [T, H*D], k/v: [T, KVH*D] -> [T, H*D]."""
        num_rows = q.shape[0]
        q = q.view(num_rows, layer.tp_q_head_num, layer.head_dim)
        k = k.view(num_rows, layer.tp_k_head_num, layer.head_dim)
        v = v.view(num_rows, layer.tp_k_head_num, layer.head_dim)
        pool = forward_batch.token_to_kv_pool
        pool.set_kv_buffer(layer.layer_id, forward_batch.out_cache_loc, k, v)
        k_buffer, v_buffer = pool.get_kv_buffer(layer.layer_id)
        if forward_batch.forward_mode.is_decode():
            out = self.forward_decode(q, k_buffer, v_buffer, layer)
        else:
            out = self.forward_extend(q, k_buffer, v_buffer, layer)
        return out.reshape(num_rows, layer.tp_q_head_num * layer.head_dim)

    def forward_decode(self, q: torch.Tensor, k_buffer: torch.Tensor, v_buffer: torch.Tensor,
                       layer: RadixAttention) -> torch.Tensor:
        """q: [B, H, D], one row per request; k/v_buffer: this layer's pool, [slots, KVH, D] -> [B, H, D]."""
        raise NotImplementedError

    def forward_extend(self, q: torch.Tensor, k_buffer: torch.Tensor, v_buffer: torch.Tensor,
                       layer: RadixAttention) -> torch.Tensor:
        """q: [T, H, D], each request's rows in a run; k/v_buffer as in forward_decode -> [T, H, D]."""
        raise NotImplementedError
