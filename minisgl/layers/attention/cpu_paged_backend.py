"""Decode attention that reads the paged KV pool in place, with the engine's CPU kernel.

The torch backend gathers every running request's whole K/V history out of the pool into one padded
batch, layer after layer, before SDPA can read it. Here each request's query row walks its own
req_to_token row and reads the slots where they lie: no copy, no padding, no mask. EXTEND and MIXED
rounds (many query rows per request) still go through SDPA, as in the torch backend.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from minisgl import kernels
from minisgl.layers.attention.torch_native_backend import TorchNativeAttnBackend

if TYPE_CHECKING:
    from minisgl.model_executor.forward_batch_info import ForwardBatch


class CpuPagedAttnBackend(TorchNativeAttnBackend):
    def init_forward_metadata(self, fb: ForwardBatch) -> None:
        if fb.forward_mode.is_decode():
            self._decode = (fb.req_to_token_pool.req_to_token, fb.req_pool_indices.contiguous(),
                            fb.seq_lens.contiguous())
            return  # nothing to gather: the kernel follows req_to_token itself
        super().init_forward_metadata(fb)

    def _forward_decode(self, q, k_buf, v_buf, layer):
        req_to_token, req_pool_indices, seq_lens = self._decode
        return kernels.decode_attention(q, k_buf, v_buf, req_to_token, req_pool_indices, seq_lens, layer.scaling)
