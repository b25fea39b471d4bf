"""RMSNorm, computed in float32 like the reference implementation, returned in the input dtype.

x / sqrt(mean(x^2) + eps) * weight. torch's fused F.rms_norm computes the normalisation in one
kernel, giving bit for bit what the three-step formula gives in float32.

Called with a residual, it first adds the layer's output into the residual stream and normalises the
sum, returning both (SGLang's fused_add_rmsnorm): the decoder layers pass the residual along this way.
`forward_cpu` does all of it in one CPU kernel (see minisgl/kernels); which path runs is chosen once,
by the model runner (see custom_op.py).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from minisgl import kernels
from minisgl.layers.custom_op import CustomOp


class RMSNorm(CustomOp):
    def __init__(self, hidden_size: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward_native(self, x: torch.Tensor, residual: torch.Tensor | None = None):
        if residual is None:
            return self._norm(x)
        residual = x + residual
        return self._norm(residual), residual

    def _norm(self, x: torch.Tensor) -> torch.Tensor:
        normed = F.rms_norm(x.float(), (x.shape[-1],), eps=self.variance_epsilon)
        return self.weight * normed.to(x.dtype)

    def forward_cpu(self, x: torch.Tensor, residual: torch.Tensor | None = None):
        if residual is None:
            return kernels.rms_norm(x, self.weight, self.variance_epsilon)
        x = x.contiguous()
        kernels.fused_add_rms_norm(x, residual, self.weight, self.variance_epsilon)  # both updated in place
        return x, residual
