"""SwiGLU's gate: silu(gate) * up, from one fused gate_up projection (one CPU kernel with `use_kernel`)."""

import torch
import torch.nn.functional as F
from torch import nn

from minisgl import kernels


class SiluAndMul(nn.Module):
    use_kernel = False

    def forward(self, gate_up: torch.Tensor) -> torch.Tensor:
        if self.use_kernel:
            return kernels.silu_and_mul(gate_up)
        gate, up = gate_up.chunk(2, dim=-1)
        return F.silu(gate) * up
