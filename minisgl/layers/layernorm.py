"""RMSNorm, computed in float32 like the reference implementation, returned in the input dtype.

x / sqrt(mean(x^2) + eps) * weight. torch's fused F.rms_norm computes the normalisation in one
kernel, giving bit for bit what the three-step formula gives in float32.
"""

import torch
import torch.nn.functional as F
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, hidden_size: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        normed = F.rms_norm(x.float(), (x.shape[-1],), eps=self.variance_epsilon)
        return self.weight * normed.to(x.dtype)
