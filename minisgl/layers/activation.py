"""SwiGLU's gate: silu(gate) * up, from one fused gate_up projection (one CPU kernel in `forward_cpu`)."""

import torch
import torch.nn.functional as F

from minisgl import kernels
from minisgl.layers.custom_op import CustomOp


class SiluAndMul(CustomOp):
    def forward_native(self, gate_up: torch.Tensor) -> torch.Tensor:
        gate, up = gate_up.chunk(2, dim=-1)
        return F.silu(gate) * up

    def forward_cpu(self, gate_up: torch.Tensor) -> torch.Tensor:
        return kernels.silu_and_mul(gate_up)
