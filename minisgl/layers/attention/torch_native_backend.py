"""Attention over the paged KV cache with torch's scaled_dot_product_attention.

Each layer reads every request's whole history (cached prefix + this round, whose K/V the base class
has just written at `out_cache_loc`) by following its req_to_token row. Nothing assumes a request's
KV slots are contiguous. It runs both kinds of round: the path to read, and the fallback everywhere.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

from minisgl.layers.attention.base_attn_backend import AttentionBackend

if TYPE_CHECKING:
    from minisgl.model_executor.forward_batch_info import ForwardBatch


class TorchNativeAttnBackend(AttentionBackend):
    def __init__(self):
        self._decode_kv_indices: torch.Tensor | None = None
        self._decode_mask: torch.Tensor | None = None
        self._extend_plan: list[tuple[int, int, torch.Tensor, torch.Tensor | None]] = []

    def init_forward_metadata(self, forward_batch: ForwardBatch) -> None:
        """Work shared by all layers: which KV slots each request reads, and its mask."""
        fb = forward_batch
        req_to_token = fb.req_to_token_pool.req_to_token
        if fb.forward_mode.is_decode():
            max_len = max(fb.seq_lens_cpu)
            self._decode_kv_indices = req_to_token[fb.req_pool_indices, :max_len]  # [B, L]
            if min(fb.seq_lens_cpu) == max_len:
                self._decode_mask = None
            else:
                # padded columns point at whatever the row holds; the mask hides them
                self._decode_mask = (torch.arange(max_len)[None, :] < fb.seq_lens[:, None])[:, None, None, :]
            return
        self._extend_plan = []
        for i in range(fb.batch_size):
            prefix, n_new, start = fb.extend_prefix_lens[i], fb.extend_seq_lens[i], fb.extend_start_loc[i]
            seq_len = prefix + n_new
            kv_indices = req_to_token[fb.req_pool_indices[i], :seq_len]
            mask = None
            if prefix > 0 and n_new > 1:
                # row j (position prefix + j) sees keys 0 .. prefix + j
                mask = torch.arange(seq_len)[None, :] <= (prefix + torch.arange(n_new))[:, None]
            self._extend_plan.append((start, n_new, kv_indices, mask))

    def forward_decode(self, q, k_buffer, v_buffer, layer):
        idx = self._decode_kv_indices  # [B, L]
        # one flat index_select per buffer is cheaper than advanced indexing with a 2-D index
        shape = (*idx.shape, layer.tp_k_head_num, layer.head_dim)
        k = k_buffer.index_select(0, idx.flatten()).view(shape).transpose(1, 2)  # [B, KVH, L, D]
        v = v_buffer.index_select(0, idx.flatten()).view(shape).transpose(1, 2)
        # one query row per request: torch's grouped-query path is the fast one here
        out = F.scaled_dot_product_attention(
            q.unsqueeze(2), k, v, attn_mask=self._decode_mask, scale=layer.scaling, enable_gqa=True
        )  # [B, H, 1, D]
        return out.squeeze(2)

    def forward_extend(self, q, k_buffer, v_buffer, layer):
        out = torch.empty_like(q)
        groups = layer.tp_q_head_num // layer.tp_k_head_num
        for start, n_new, kv_indices, mask in self._extend_plan:
            # 4-D [1, H, n, D]: with 3-D inputs torch falls back to its slow unfused path on CPU
            qi = q[start : start + n_new].transpose(0, 1).unsqueeze(0)
            # [1, H, seq, D]
            ki = _expand_kv(k_buffer[kv_indices].transpose(0, 1), groups, dim=0).unsqueeze(0)
            vi = _expand_kv(v_buffer[kv_indices].transpose(0, 1), groups, dim=0).unsqueeze(0)
            causal = mask is None and n_new > 1
            oi = F.scaled_dot_product_attention(qi, ki, vi, attn_mask=mask, is_causal=causal,
                                                scale=layer.scaling)
            out[start : start + n_new] = oi[0].transpose(0, 1)
        return out


def _expand_kv(x: torch.Tensor, groups: int, dim: int) -> torch.Tensor:
    """Grouped-query attention: each KV head serves `groups` query heads. For many query rows,
    expanding the KV heads explicitly is much faster on CPU than torch's enable_gqa path."""
    return x if groups == 1 else x.repeat_interleave(groups, dim=dim)
