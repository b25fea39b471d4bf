"""A Linear layer whose weight can be packed once for oneDNN, the CPU's fast bf16 matmul path.

Batch-1 decode is a chain of small matrix-vector products: most of each one's time on a CPU goes to
re-laying out the bf16 weight for the matmul kernel, again on every call. Packing the weight once, at
load time, into the layout oneDNN wants removes that work (the benchmarks page, "Forward pass", has the
numbers). The packed copy sits beside the ordinary `weight` parameter, which stays the source of truth
for checkpoints, weight sharing and tests; packing only changes which kernel computes the product.

The same ops serve float32 speculative decoding (pack_weight_for_rows): a verify forward multiplies K + 1
rows per request, which F.linear prices at nearly K + 1 one-row products on this CPU, and oneDNN's path
tuned for that many rows at well under half of that.

The ops are torch's own (`torch.ops.mkldnn`), but private: they are looked up at run time, checked on
a small product against F.linear, and skipped (with the plain path kept) wherever they are missing.
"""

from __future__ import annotations

import logging
import weakref

import torch
import torch.nn.functional as F
from torch import nn

from minisgl.distributed.communication_op import (
    tensor_model_parallel_all_gather,
    tensor_model_parallel_all_reduce,
)
from minisgl.distributed.parallel_state import (
    divide,
    get_tensor_model_parallel_rank,
    get_tensor_model_parallel_world_size,
)

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


def pack_weight_for_rows(weight: torch.Tensor, rows: int) -> torch.Tensor | None:
    """A float32 weight in oneDNN's layout tuned for `rows` rows, or None where that path is unavailable.

    Speculative decoding's verify forward multiplies K + 1 rows per request. Here torch's F.linear makes
    5 rows cost 4-6x one row (benchmarks/bench_matmul_rows.py), oneDNN's packed path about 1.2-1.8x. Its
    sums run in another order, so it agrees with F.linear to float32 rounding, not bit for bit (as F.linear
    on many rows does not with F.linear on one)."""
    if weight.device.type != "cpu" or weight.dtype != torch.float32 or not onednn_packing_available():
        return None
    key = id(weight)  # runners sharing the weights (Engine.fork) share these too
    if key not in _packed_for_rows:
        _packed_for_rows[key] = {}
        weakref.finalize(weight, _packed_for_rows.pop, key, None)  # dropped with the weight
    done = _packed_for_rows[key]
    if rows not in done:
        done[rows] = _pack_for_rows(weight, rows)
    return done[rows]


_packed_for_rows: dict[int, dict[int, torch.Tensor | None]] = {}  # id(live weight) -> {rows: packed or None}


def _pack_for_rows(weight: torch.Tensor, rows: int) -> torch.Tensor | None:
    try:
        packed = torch.ops.mkldnn._reorder_linear_weight(weight.detach(), rows)
        torch.ops.mkldnn._linear_pointwise(torch.ones(rows, weight.shape[1]), packed, None, "none", [], "")
    except RuntimeError as e:  # an op that exists but refuses this CPU
        logger.debug("oneDNN float32 packing unavailable: %s", e)
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


# ---- tensor parallelism (SGLang's classes): each rank holds a slice of the weight ----------------------
# Column-parallel: the output features are split, each rank computes its slice, no communication.
# Row-parallel: the input features are split, each rank computes a partial sum, an all-reduce adds them.
# A column-parallel layer followed by a row-parallel one (qkv -> o, gate_up -> down) talks once.
# With one rank every class is exactly the Linear above, loaded with the whole weight.


def copy_rank_slice(dst: torch.Tensor, src: torch.Tensor, dim: int, rank: int, tp_size: int) -> None:
    """dst <- rank `rank`'s slice of `src` along `dim`; `src` must be exactly tp_size slices of dst's
    shape."""
    want = list(dst.shape)
    want[dim] *= tp_size
    if list(src.shape) != want:
        raise ValueError(f"expected {want}")
    dst.copy_(src.narrow(dim, rank * dst.shape[dim], dst.shape[dim]))


class ColumnParallelLinear(Linear):
    def __init__(self, input_size: int, output_size: int, bias: bool = True, gather_output: bool = False):
        self.tp_rank, self.tp_size = get_tensor_model_parallel_rank(), get_tensor_model_parallel_world_size()
        super().__init__(input_size, divide(output_size, self.tp_size, "output features"), bias=bias)
        self.gather_output = gather_output

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self._forward_method(x)
        return tensor_model_parallel_all_gather(out) if self.gather_output else out

    def weight_loader(self, param: nn.Parameter, loaded_weight: torch.Tensor, shard_id=None) -> None:
        copy_rank_slice(param, loaded_weight, 0, self.tp_rank, self.tp_size)


class MergedColumnParallelLinear(ColumnParallelLinear):
    """Several column-parallel outputs in one matmul (gate_proj and up_proj): each rank holds its slice of
    each."""

    def __init__(self, input_size: int, output_sizes: list[int], bias: bool = True):
        self.output_sizes = output_sizes
        super().__init__(input_size, sum(output_sizes), bias=bias)

    def weight_loader(self, param: nn.Parameter, loaded_weight: torch.Tensor, shard_id: int) -> None:
        size = self.output_sizes[shard_id] // self.tp_size
        offset = sum(self.output_sizes[:shard_id]) // self.tp_size
        copy_rank_slice(param.narrow(0, offset, size), loaded_weight, 0, self.tp_rank, self.tp_size)


class QKVParallelLinear(ColumnParallelLinear):
    """q, k and v in one matmul, split by attention heads: rank r holds query heads and key/value heads
    r/N."""

    def __init__(self, hidden_size: int, head_size: int, total_num_heads: int, total_num_kv_heads: int,
                 bias: bool = True):
        tp_size = get_tensor_model_parallel_world_size()
        self.head_size = head_size
        self.num_heads = divide(total_num_heads, tp_size, "attention heads")
        self.num_kv_heads = divide(total_num_kv_heads, tp_size, "key/value heads")
        super().__init__(hidden_size, (total_num_heads + 2 * total_num_kv_heads) * head_size, bias=bias)

    def weight_loader(self, param: nn.Parameter, loaded_weight: torch.Tensor, shard_id: str) -> None:
        q, kv = self.num_heads * self.head_size, self.num_kv_heads * self.head_size
        offset, size = {"q": (0, q), "k": (q, kv), "v": (q + kv, kv)}[shard_id]
        copy_rank_slice(param.narrow(0, offset, size), loaded_weight, 0, self.tp_rank, self.tp_size)


class RowParallelLinear(Linear):
    def __init__(self, input_size: int, output_size: int, bias: bool = True, reduce_results: bool = True):
        self.tp_rank, self.tp_size = get_tensor_model_parallel_rank(), get_tensor_model_parallel_world_size()
        super().__init__(divide(input_size, self.tp_size, "input features"), output_size, bias=bias)
        self.reduce_results = reduce_results

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self._forward_method(x)
        return tensor_model_parallel_all_reduce(out) if self.reduce_results and self.tp_size > 1 else out

    def weight_loader(self, param: nn.Parameter, loaded_weight: torch.Tensor, shard_id=None) -> None:
        if param.dim() == 1:  # the bias is added once: rank 0 holds it, the others add zeros before the sum
            copy_rank_slice(param, loaded_weight if self.tp_rank == 0 else torch.zeros_like(loaded_weight), 0,
                            0, 1)
            return
        copy_rank_slice(param, loaded_weight, 1, self.tp_rank, self.tp_size)
