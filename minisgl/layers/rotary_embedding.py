"""Rotary position embedding, indexed by each row's logical position (never by its KV slot)."""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import torch

from minisgl import kernels
from minisgl.layers.custom_op import CustomOp


def _inv_freq(head_dim: int, theta: float, scaling: dict[str, Any] | None) -> torch.Tensor:
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
    kind = (scaling or {}).get("rope_type", (scaling or {}).get("type", "default"))
    if kind == "default":
        return inv_freq
    if kind == "linear":
        return inv_freq / float(scaling["factor"])
    if kind == "llama3":
        factor = float(scaling["factor"])
        low, high = float(scaling["low_freq_factor"]), float(scaling["high_freq_factor"])
        old_len = float(scaling["original_max_position_embeddings"])
        wavelen = 2 * math.pi / inv_freq
        smooth = (old_len / wavelen - low) / (high - low)
        scaled = (1 - smooth) * inv_freq / factor + smooth * inv_freq
        out = torch.where(wavelen > old_len / low, inv_freq / factor, inv_freq)
        mid = (wavelen <= old_len / low) & (wavelen >= old_len / high)
        return torch.where(mid, scaled, out)
    raise ValueError(f"rope scaling type {kind!r} is not supported (default, linear, llama3)")


class RopeAngles(NamedTuple):
    """This round's rotation for the torch code: cos and sin of each row's angles, [T, 1, D], in the
    model's dtype."""

    cos: torch.Tensor
    sin: torch.Tensor

    def apply(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        cos, sin = self.cos, self.sin
        return q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin


class RopeTables(NamedTuple):
    """This round's rotation for the CPU kernel: the rows' positions and the whole float32 tables, which
    the kernel indexes itself while it rotates q and k in place."""

    positions: torch.Tensor
    cos_cache: torch.Tensor
    sin_cache: torch.Tensor

    def apply(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        kernels.rotary_embedding(self.positions, q, k, self.cos_cache, self.sin_cache)  # in place
        return q, k


class RotaryEmbedding(CustomOp):
    """Looks up this round's angles once per forward; every layer then applies them to its q and k. The
    kind of angles it returns (RopeAngles or RopeTables) follows the path chosen at load."""

    def __init__(self, head_dim: int, max_position: int, theta: float, scaling: dict | None = None):
        super().__init__()
        self.head_dim, self.max_position, self.theta, self.scaling = head_dim, max_position, theta, scaling
        self.register_buffer("cos_cache", torch.empty(0), persistent=False)
        self.register_buffer("sin_cache", torch.empty(0), persistent=False)
        self.build_cache()

    def build_cache(self) -> None:
        """cos/sin of every position (called again after a meta-device init). Buffers, so they follow the
        model's dtype and device; the kernel keeps its own float32 copy (see on_dispatch)."""
        self.cos_cache, self.sin_cache = self._tables()
        self.on_dispatch()

    def on_dispatch(self) -> None:
        self._kernel_tables = self._tables() if self.use_kernel else None

    def _tables(self) -> tuple[torch.Tensor, torch.Tensor]:
        with torch.device("cpu"):
            inv_freq = _inv_freq(self.head_dim, self.theta, self.scaling)
            freqs = torch.outer(torch.arange(self.max_position, dtype=torch.float32), inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos(), emb.sin()

    def forward_native(self, positions: torch.Tensor, dtype: torch.dtype) -> RopeAngles:
        return RopeAngles(self.cos_cache[positions].to(dtype).unsqueeze(1),
                          self.sin_cache[positions].to(dtype).unsqueeze(1))

    def forward_cpu(self, positions: torch.Tensor, dtype: torch.dtype) -> RopeTables:
        return RopeTables(positions.contiguous(), *self._kernel_tables)


def apply_rotary_emb(q: torch.Tensor, k: torch.Tensor, angles: RopeAngles | RopeTables):
    """q: [T, heads, D], k: [T, kv_heads, D]. Rotate each row by the angle of its logical position."""
    return angles.apply(q, k)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)
