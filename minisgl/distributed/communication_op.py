"""The collectives of tensor parallelism (SGLang's names): all-reduce after a row-parallel linear and the
vocabulary-parallel embedding, all-gather of the vocabulary-parallel logits, and `broadcast_pyobj` for
the scheduler's inputs. With one rank each returns its input untouched.

Every collective is counted in `comm_stats` (how many, and seconds spent): the scheduler's trace
collector reads and resets it once per forward, so the layers hold no tracing code.
"""

from __future__ import annotations

import pickle
import time
from dataclasses import dataclass

import torch

from minisgl.distributed.parallel_state import get_tp_group


@dataclass
class CommStats:
    all_reduce: int = 0
    all_gather: int = 0
    seconds: float = 0.0

    def take(self) -> CommSummary:
        """What happened since the last take, then start again from zero."""
        out = CommSummary(self.all_reduce, self.all_gather, round(self.seconds * 1e3, 3))
        self.all_reduce = self.all_gather = 0
        self.seconds = 0.0
        return out


@dataclass(frozen=True)
class CommSummary:
    all_reduce: int
    all_gather: int
    comm_ms: float


comm_stats = CommStats()


def tensor_model_parallel_all_reduce(x: torch.Tensor) -> torch.Tensor:
    """Sum `x` over the ranks, in place (every rank ends with the same sum)."""
    tp = get_tp_group()
    if tp is None or tp.world_size == 1:
        return x
    import torch.distributed as dist

    t0 = time.perf_counter()
    dist.all_reduce(x, group=tp.device_group)
    comm_stats.seconds += time.perf_counter() - t0
    comm_stats.all_reduce += 1
    return x


def tensor_model_parallel_all_gather(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Every rank's `x` concatenated along `dim`, in rank order."""
    tp = get_tp_group()
    if tp is None or tp.world_size == 1:
        return x
    import torch.distributed as dist

    t0 = time.perf_counter()
    parts = [torch.empty_like(x) for _ in range(tp.world_size)]
    dist.all_gather(parts, x.contiguous(), group=tp.device_group)
    out = torch.cat(parts, dim=dim)
    comm_stats.seconds += time.perf_counter() - t0
    comm_stats.all_gather += 1
    return out


def broadcast_pyobj(data: list | None, rank: int, group, src: int = 0) -> list:
    """Rank `src` sends `data` (a picklable list), every other rank returns it: a size, then the bytes."""
    import torch.distributed as dist

    if rank == src:
        payload = pickle.dumps(data) if data else b""  # nothing new: only the size 0 travels
        size = torch.tensor([len(payload)], dtype=torch.long)
        dist.broadcast(size, src=src, group=group)
        if payload:
            dist.broadcast(torch.frombuffer(bytearray(payload), dtype=torch.uint8), src=src, group=group)
        return data or []
    size = torch.tensor([0], dtype=torch.long)
    dist.broadcast(size, src=src, group=group)
    if size.item() == 0:
        return []
    buf = torch.empty(int(size.item()), dtype=torch.uint8)
    dist.broadcast(buf, src=src, group=group)
    return pickle.loads(buf.numpy().tobytes())


def all_reduce_min_int(value: int) -> int:
    """The smallest of every rank's `value` (over the gloo group): a number all ranks must agree on."""
    tp = get_tp_group()
    if tp is None:
        return value
    import torch.distributed as dist

    t = torch.tensor([value], dtype=torch.long)
    dist.all_reduce(t, op=dist.ReduceOp.MIN, group=tp.cpu_group)
    return int(t.item())
