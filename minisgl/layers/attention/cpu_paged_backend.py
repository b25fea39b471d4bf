"""Decode attention that reads the paged KV pool in place, with the engine's CPU kernel.

The torch backend gathers every running request's whole K/V history out of the pool into one padded
batch, layer after layer, before SDPA can read it. Here each request's query row walks its own
req_to_token row and reads the slots where they lie: no copy, no padding, no mask.

A decode-only backend: rounds with many query rows per request (EXTEND, MIXED) need another one, and
the model runner pairs it with the torch backend in a HybridAttnBackend.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from minisgl import kernels
from minisgl.layers.attention.base_attn_backend import AttentionBackend

if TYPE_CHECKING:
    from minisgl.model_executor.forward_batch_info import ForwardBatch


class CpuPagedAttnBackend(AttentionBackend):
    def init_forward_metadata(self, forward_batch: ForwardBatch) -> None:
        fb = forward_batch
        if not fb.forward_mode.is_decode():
            raise ValueError(f"{type(self).__name__} runs DECODE rounds only, not {fb.forward_mode.name} "
                             "(pair it with an extend backend in a HybridAttnBackend)")
        # nothing to gather: the kernel follows req_to_token itself
        self._decode = (fb.req_to_token_pool.req_to_token, fb.req_pool_indices.contiguous(), fb.seq_lens.contiguous())

    def forward_decode(self, q, k_buffer, v_buffer, layer):
        req_to_token, req_pool_indices, seq_lens = self._decode
        return kernels.decode_attention(q, k_buffer, v_buffer, req_to_token, req_pool_indices, seq_lens,
                                        layer.scaling)
