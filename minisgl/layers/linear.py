"""A Linear layer whose weight can be packed once for oneDNN, the CPU's fast bf16 matmul path.

Batch-1 decode is a chain of small matrix-vector products: most of each one's time on a CPU goes to
re-laying out the bf16 weight for the matmul kernel, again on every call. Packing the weight once, at
load time, into the layout oneDNN wants removes that work (measured 1.5-1.8x per projection at batch
1 here). The packed copy sits beside the ordinary `weight` parameter, which stays the source of truth
for checkpoints, weight sharing and tests; packing only changes which kernel computes the product.

The ops are torch's own (`torch.ops.mkldnn`), but private: they are looked up at run time, checked on
a small product against F.linear, and skipped (with the plain path kept) wherever they are missing.
"""

from __future__ import annotations

import logging

import torch
import torch.nn.functional as F
from torch import nn

logger = logging.getLogger(__name__)

PACKED_DTYPES = (torch.bfloat16,)


def onednn_packing_available() -> bool:
    mkldnn = torch.ops.mkldnn
    return (
        torch.backends.mkldnn.is_available()
        and hasattr(mkldnn, "_reorder_linear_weight")
        and hasattr(mkldnn, "_linear_pointwise")
    )


def pack_weight(weight: torch.Tensor) -> torch.Tensor | None:
    """The weight in oneDNN's layout, or None where that path is unavailable or disagrees with F.linear."""
    if weight.device.type != "cpu" or weight.dtype not in PACKED_DTYPES or not onednn_packing_available():
        return None
    try:
        packed = torch.ops.mkldnn._reorder_linear_weight(weight.detach(), 1)  # 1: tuned for one row
        probe = torch.ones(1, weight.shape[1], dtype=weight.dtype)
        got = torch.ops.mkldnn._linear_pointwise(probe, packed, None, "none", [], "")
    except RuntimeError as e:  # an op that exists but refuses this CPU or dtype
        logger.debug("oneDNN weight packing unavailable: %s", e)
        return None
    if not torch.equal(got, F.linear(probe, weight.detach())):
        return None
    return packed


def packed_linear(x: torch.Tensor, packed: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    rows = x.reshape(-1, x.shape[-1])
    out = torch.ops.mkldnn._linear_pointwise(rows, packed, bias, "none", [], "")
    return out.view(*x.shape[:-1], out.shape[-1])


class Linear(nn.Linear):
    """nn.Linear, plus an optional packed copy of the weight. Which product `forward` runs is decided
    when `packed_weight` is set (by `pack()`, once, at load), not on every call."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.packed_weight = None

    @property
    def packed_weight(self) -> torch.Tensor | None:
        return self._packed_weight

    @packed_weight.setter
    def packed_weight(self, packed: torch.Tensor | None) -> None:
        self._packed_weight = packed
        self._forward_method = self.forward_native if packed is None else self.forward_packed

    def pack(self) -> bool:
        self.packed_weight = pack_weight(self.weight)
        return self.packed_weight is not None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._forward_method(x)

    def forward_native(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight, self.bias)

    def forward_packed(self, x: torch.Tensor) -> torch.Tensor:
        return packed_linear(x, self._packed_weight, self.bias)


def pack_linear_weights(model: nn.Module) -> int:
    """Pack every Linear of a loaded model; returns how many were packed (0 where the path is missing)."""
    count = sum(m.pack() for m in model.modules() if isinstance(m, Linear))
    if count:
        logger.info("packed %d linear weights for oneDNN", count)
    return count
