"""HybridAttnBackend: one backend for EXTEND rounds, another for DECODE rounds (SGLang's name).

Prefill and decode ask different things of attention: many query rows per request against a causal
mask, or one row per request against its whole history. A backend may be good at only one of them;
this one holds two and hands each round, metadata and layers alike, to the one that fits it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from minisgl.layers.attention.base_attn_backend import AttentionBackend

if TYPE_CHECKING:
    from minisgl.model_executor.forward_batch_info import ForwardBatch


class HybridAttnBackend(AttentionBackend):
    def __init__(self, prefill_backend: AttentionBackend, decode_backend: AttentionBackend):
        self.prefill_backend = prefill_backend
        self.decode_backend = decode_backend

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(prefill={type(self.prefill_backend).__name__}, "
                f"decode={type(self.decode_backend).__name__})")

    def init_forward_metadata(self, forward_batch: ForwardBatch) -> None:
        # DECODE goes to the decode backend; so does TARGET_VERIFY where it reads verify rows as decode
        # queries (CpuPagedAttnBackend); EXTEND and MIXED go to the prefill backend
        decode = self.decode_backend.handles_as_decode(forward_batch)
        self._current = self.decode_backend if decode else self.prefill_backend
        self._current.init_forward_metadata(forward_batch)

    def forward_decode(self, q, k_buffer, v_buffer, layer):
        return self._current.forward_decode(q, k_buffer, v_buffer, layer)

    def forward_extend(self, q, k_buffer, v_buffer, layer):
        return self._current.forward_extend(q, k_buffer, v_buffer, layer)
