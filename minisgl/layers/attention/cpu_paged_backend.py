"""Decode attention that reads the paged KV pool in place, with the engine's CPU kernel.

The torch backend gathers every running request's whole K/V history out of the pool into one padded
batch, layer after layer, before SDPA can read it. Here each request's query row walks its own
req_to_token row and reads the slots where they lie: no copy, no padding, no mask.

It also runs TARGET_VERIFY rounds (speculative decoding), whose rows are a request's last token and its
drafts: each row is read as a decode query of its own, over its request's first position + 1 slots (its
prefix and the rows before it), so a verify row is computed exactly as the decode row it stands for.
Rounds with prompt rows (EXTEND, MIXED) need another backend, and the model runner pairs this one with
the torch backend in a HybridAttnBackend.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from minisgl import kernels
from minisgl.layers.attention.base_attn_backend import AttentionBackend

if TYPE_CHECKING:
    from minisgl.model_executor.forward_batch_info import ForwardBatch


class CpuPagedAttnBackend(AttentionBackend):
    def handles_as_decode(self, forward_batch: ForwardBatch) -> bool:
        return forward_batch.forward_mode.is_decode() or forward_batch.row_seq_lens is not None

    def init_forward_metadata(self, forward_batch: ForwardBatch) -> None:
        fb = forward_batch
        if not self.handles_as_decode(fb):
            raise ValueError(f"{type(self).__name__} runs DECODE and TARGET_VERIFY rounds only, not "
                             f"{fb.forward_mode.name} (pair it with an extend backend in a "
                             "HybridAttnBackend)")
        # nothing to gather: the kernel follows req_to_token itself
        table = fb.req_to_token_pool.req_to_token
        if fb.forward_mode.is_decode():
            self._decode = (table, fb.req_pool_indices.contiguous(), fb.seq_lens.contiguous())
        else:  # one query per verify row
            self._decode = (table, fb.row_req_pool_indices.contiguous(), fb.row_seq_lens.contiguous())

    def forward_extend(self, q, k_buffer, v_buffer, layer):  # TARGET_VERIFY: rows as decode queries
        return self.forward_decode(q, k_buffer, v_buffer, layer)

    def forward_decode(self, q, k_buffer, v_buffer, layer):
        req_to_token, req_pool_indices, seq_lens = self._decode
        return kernels.decode_attention(q, k_buffer, v_buffer, req_to_token, req_pool_indices, seq_lens,
                                        layer.scaling)
