"""The tensor-parallel group of this process: which rank it is, how many ranks there are, and the torch
process groups the ranks talk over (SGLang's `parallel_state`, cut to tensor parallelism).

With `--tp-size 1` (the default) nothing is initialized: every getter answers rank 0 of 1 and the
collectives of communication_op.py return their input, so a single-process engine never imports or
starts torch.distributed.

Backends, chosen by `--device`: gloo on the cpu, nccl on cuda, hccl on Ascend npus (torch_npu). The
scheduler's Python objects (the requests rank 0 received) travel over a second group on gloo, as in
SGLang (`cpu_group`); on the cpu that is the same group.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import torch

BACKENDS = {"cpu": "gloo", "cuda": "nccl", "npu": "hccl"}
# an idle server waits in a broadcast until the next request arrives: far longer than gloo's 30 minutes
IDLE_TIMEOUT = timedelta(days=7)


@dataclass(frozen=True)
class GroupCoordinator:
    rank: int
    world_size: int
    device_group: object  # torch.distributed ProcessGroup for tensors (gloo / nccl / hccl)
    cpu_group: object  # gloo, for pickled Python objects


_TP: GroupCoordinator | None = None
# the listening socket `minisgl serve` bound for rank 0's store (launch.py with_dist_init_addr), or None
LISTEN_SOCKET = None


def backend_for(device: str) -> str:
    return BACKENDS[device]


def init_distributed_environment(world_size: int, rank: int, dist_init_method: str, device: str = "cpu",
                                 local_rank: int = 0) -> GroupCoordinator:
    """Join the `world_size` ranks at `dist_init_method` (tcp://host:port); every rank calls this once.
    Rank 0 holds the store the ranks meet in: on the socket the launcher bound for it (LISTEN_SOCKET), else
    on the port, which it binds itself."""
    global _TP
    import torch.distributed as dist

    backend = backend_for(device)
    if device == "cuda":
        torch.cuda.set_device(local_rank)
    elif device == "npu":
        torch.npu.set_device(local_rank)  # registered by torch_npu (ModelRunner imported it)
    host, _, port = dist_init_method.removeprefix("tcp://").rpartition(":")
    held = {"master_listen_fd": LISTEN_SOCKET.fileno()} if rank == 0 and LISTEN_SOCKET is not None else {}
    store = dist.TCPStore(host, int(port), world_size, is_master=rank == 0, timeout=IDLE_TIMEOUT,
                          wait_for_workers=False, **held)
    dist.init_process_group(backend=backend, store=store, world_size=world_size, rank=rank,
                            timeout=IDLE_TIMEOUT)
    group = dist.group.WORLD
    cpu_group = group if backend == "gloo" else dist.new_group(backend="gloo", timeout=IDLE_TIMEOUT)
    _TP = GroupCoordinator(rank, world_size, group, cpu_group)
    return _TP


def destroy_distributed_environment() -> None:
    global _TP
    if _TP is None:
        return
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()
    _TP = None


def model_parallel_is_initialized() -> bool:
    return _TP is not None


def get_tp_group() -> GroupCoordinator | None:
    return _TP


def get_tensor_model_parallel_world_size() -> int:
    return 1 if _TP is None else _TP.world_size


def get_tensor_model_parallel_rank() -> int:
    return 0 if _TP is None else _TP.rank


def divide(numerator: int, denominator: int, what: str = "size") -> int:
    """numerator / denominator, or a clear error when the ranks cannot split it evenly."""
    if numerator % denominator:
        raise ValueError(f"--tp-size {denominator} does not divide the model's {what} ({numerator})")
    return numerator // denominator
