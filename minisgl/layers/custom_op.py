"""CustomOp: a layer with two implementations of one computation, chosen once, not on every call.

SGLang's layers that have hand-written kernels (RMSNorm, SiluAndMul, RotaryEmbedding, ...) derive from
a CustomOp: `forward_native` is the plain torch code, the reference to read; `forward_cuda`,
`forward_cpu`, ... call a kernel. Which one runs is decided when the layer is set up and kept in
`_forward_method`; `forward` only calls it, so a decode step does not ask "kernel or torch?" again in
each of its hundred-odd layer calls.

Here only `forward_cpu` exists beside `forward_native`, and the choice cannot be made in `__init__`:
the kernels must first build (minisgl/kernels) and `--cpu-kernels` may turn them off. So the
ModelRunner makes it once, after loading, by setting `use_kernel`, which rebinds `_forward_method`.
"""

from __future__ import annotations

from torch import nn


class CustomOp(nn.Module):
    def __init__(self):
        super().__init__()
        self._use_kernel = False
        self._forward_method = self.forward_native

    @property
    def use_kernel(self) -> bool:
        """Whether `forward` runs `forward_cpu` (the engine's CPU kernel) rather than `forward_native`."""
        return self._use_kernel

    @use_kernel.setter
    def use_kernel(self, on: bool) -> None:
        self._use_kernel = bool(on)
        self._forward_method = self.forward_cpu if on else self.forward_native
        self.on_dispatch()

    def on_dispatch(self) -> None:
        """Called after each choice: a place to prepare what the chosen path needs (tables, layouts)."""

    def forward(self, *args, **kwargs):
        return self._forward_method(*args, **kwargs)

    def forward_native(self, *args, **kwargs):
        raise NotImplementedError

    def forward_cpu(self, *args, **kwargs):
        raise NotImplementedError
