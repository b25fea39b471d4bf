"""Record the kernel calls of one forward pass and replay them in one C call (csrc/graph.cpp).

While `record()` is open, every kernel call of minisgl.kernels also writes down its arguments (pointers,
sizes, thread count) as one GraphOp, and keeps alive the tensors those pointers name. `KernelGraph.replay()`
then runs the same calls on the same memory, in order, without Python in between. Only kernel calls are
recorded, and the torch steps a kernel wrapper records itself (`Recorder.add_step`: a product that
dequantizes GGUF blocks for oneDNN, kernels/dequant_gemm.py), which the replay calls between the runs of
kernel calls. Any other torch op of the forward pass is missing from the replay, which is why the graph
runner (model_executor/cpu_graph_runner.py) checks a graph against the plain forward before it trusts it.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable
from contextlib import contextmanager

import torch

from minisgl import kernels

# in csrc/graph.cpp's order: the switch in graph_replay numbers them the same way
KERNELS = [(name, dtype) for name in ("rms_norm", "fused_add_rms_norm", "rotary_embedding", "silu_and_mul",
                                      "decode_attention", "q8_0_linear", "q4_linear", "kv_write",
                                      "q8_0_embedding")
           for dtype in (torch.float32, torch.bfloat16)] + [("bf16_to_f32", torch.bfloat16)]
_INDEX = {kernel: i for i, kernel in enumerate(KERNELS)}
_ARGS = 15  # integer and pointer arguments a GraphOp holds


class GraphOp(ctypes.Structure):
    _fields_ = [("kernel", ctypes.c_int64), ("a", ctypes.c_int64 * _ARGS), ("f", ctypes.c_float)]


class KernelGraph:
    """A recorded list of kernel calls, the torch steps between them, and the tensors they read and write."""

    def __init__(self, ops: list[GraphOp], tensors: list[torch.Tensor],
                 steps: list[tuple[int, Callable]] = ()):
        self._ops = (GraphOp * len(ops))(*ops)
        self.tensors = tensors  # kept alive: the recorded pointers name their memory
        self.steps = list(steps)  # (number of kernel calls before it, torch step), in order
        self._replay = kernels._lib.graph_replay
        self._replay.argtypes, self._replay.restype = [ctypes.c_void_p, ctypes.c_int64], None

    def __len__(self) -> int:
        return len(self._ops)

    def kernel_names(self) -> list[str]:
        return [KERNELS[op.kernel][0] for op in self._ops]

    def replay(self) -> None:
        start, base, size = 0, ctypes.addressof(self._ops), ctypes.sizeof(GraphOp)
        for at, step in self.steps:
            if at > start:
                self._replay(base + start * size, at - start)
            step()
            start = at
        if len(self._ops) > start:
            self._replay(base + start * size, len(self._ops) - start)


class Recorder:
    def __init__(self):
        self.ops: list[GraphOp] = []
        self.tensors: list[torch.Tensor] = []
        self.steps: list[tuple[int, Callable]] = []

    def add(self, name: str, dtype: torch.dtype, args: tuple, keep: tuple[torch.Tensor, ...]) -> None:
        if (name, dtype) not in _INDEX:
            raise RuntimeError(f"kernel {name} ({dtype}) cannot be recorded")
        op = GraphOp(kernel=_INDEX[name, dtype])
        ints = [a for a in args if not isinstance(a, float)]
        floats = [a for a in args if isinstance(a, float)]
        assert len(ints) <= _ARGS and len(floats) <= 1, f"{name}: more arguments than a GraphOp holds"
        op.a[: len(ints)] = ints
        op.f = floats[0] if floats else 0.0
        self.ops.append(op)
        self.tensors.extend(keep)

    def add_step(self, step: Callable[[], None], keep: tuple[torch.Tensor, ...]) -> None:
        """A torch step the replay calls after the kernel calls recorded so far; it must read and write only
        the tensors in `keep` (and buffers of its own), in place."""
        self.steps.append((len(self.ops), step))
        self.tensors.extend(keep)

    def graph(self) -> KernelGraph:
        return KernelGraph(self.ops, self.tensors, self.steps)


@contextmanager
def record():
    """Kernel calls this thread makes inside the block are recorded (and still run); yields the Recorder.
    Other threads' calls are not (the overlap loop's forward thread may record while another engine runs)."""
    if not kernels.available():
        raise RuntimeError(f"the CPU kernels are unavailable: {kernels.unavailable_reason()}")
    thread = threading.get_ident()
    if thread in kernels._recorders:
        raise RuntimeError("already recording a kernel graph")
    recorder = kernels._recorders[thread] = Recorder()
    try:
        yield recorder
    finally:
        del kernels._recorders[thread]
