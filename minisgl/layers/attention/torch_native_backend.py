"""Attention over the paged KV cache with torch's scaled_dot_product_attention.

Every call first writes this round's K/V at `out_cache_loc`, then reads each request's whole history
(cached prefix + this round) by following its req_to_token row. Nothing assumes a request's KV slots
are contiguous.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

if TYPE_CHECKING:
    from minisgl.layers.radix_attention import RadixAttention
    from minisgl.model_executor.forward_batch_info import ForwardBatch


class TorchNativeAttnBackend:
    def __init__(self):
        self._decode_kv_indices: torch.Tensor | None = None
        self._decode_mask: torch.Tensor | None = None
        self._extend_plan: list[tuple[int, int, torch.Tensor, torch.Tensor | None]] = []

    def init_forward_metadata(self, fb: ForwardBatch) -> None:
        """Work shared by all layers: which KV slots each request reads, and its mask."""
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

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layer: RadixAttention, fb: ForwardBatch):
        """q: [T, H*D], k/v: [T, KVH*D] -> [T, H*D]."""
        num_rows = q.shape[0]
        q = q.view(num_rows, layer.tp_q_head_num, layer.head_dim)
        k = k.view(num_rows, layer.tp_k_head_num, layer.head_dim)
        v = v.view(num_rows, layer.tp_k_head_num, layer.head_dim)
        fb.token_to_kv_pool.set_kv_buffer(layer.layer_id, fb.out_cache_loc, k, v)
        k_buf, v_buf = fb.token_to_kv_pool.get_kv_buffer(layer.layer_id)
        if fb.forward_mode.is_decode():
            out = self._forward_decode(q, k_buf, v_buf, layer)
        else:
            out = self._forward_extend(q, k_buf, v_buf, layer)
        return out.reshape(num_rows, layer.tp_q_head_num * layer.head_dim)

    def _forward_decode(self, q, k_buf, v_buf, layer):
        idx = self._decode_kv_indices  # [B, L]
        # one flat index_select per buffer is cheaper than advanced indexing with a 2-D index
        shape = (*idx.shape, layer.tp_k_head_num, layer.head_dim)
        k = k_buf.index_select(0, idx.flatten()).view(shape).transpose(1, 2)  # [B, KVH, L, D]
        v = v_buf.index_select(0, idx.flatten()).view(shape).transpose(1, 2)
        # one query row per request: torch's grouped-query path is the fast one here
        out = F.scaled_dot_product_attention(
            q.unsqueeze(2), k, v, attn_mask=self._decode_mask, scale=layer.scaling, enable_gqa=True
        )  # [B, H, 1, D]
        return out.squeeze(2)

    def _forward_extend(self, q, k_buf, v_buf, layer):
        out = torch.empty_like(q)
        groups = layer.tp_q_head_num // layer.tp_k_head_num
        for start, n_new, kv_indices, mask in self._extend_plan:
            # 4-D [1, H, n, D]: with 3-D inputs torch falls back to its slow unfused path on CPU
            qi = q[start : start + n_new].transpose(0, 1).unsqueeze(0)
            ki = _expand_kv(k_buf[kv_indices].transpose(0, 1), groups, dim=0).unsqueeze(0)  # [1, H, seq, D]
            vi = _expand_kv(v_buf[kv_indices].transpose(0, 1), groups, dim=0).unsqueeze(0)
            causal = mask is None and n_new > 1
            oi = F.scaled_dot_product_attention(qi, ki, vi, attn_mask=mask, is_causal=causal, scale=layer.scaling)
            out[start : start + n_new] = oi[0].transpose(0, 1)
        return out


def _expand_kv(x: torch.Tensor, groups: int, dim: int) -> torch.Tensor:
    """Grouped-query attention: each KV head serves `groups` query heads. For many query rows,
    expanding the KV heads explicitly is much faster on CPU than torch's enable_gqa path."""
    return x if groups == 1 else x.repeat_interleave(groups, dim=dim)
