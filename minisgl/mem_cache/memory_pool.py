"""The two memory pools of the engine.

ReqToTokenPool maps (request slot, logical position) -> KV slot. TokenToKVPool owns the K and V
buffers of every layer and the allocator of KV slots. A request's tokens live at scattered KV slots;
only req_to_token knows their order.

The pools keep no history and emit nothing: `alloc` returns the slots it took, and the CacheManager,
which makes every alloc and free of the scheduler, records them for whoever reports them.
"""

from __future__ import annotations

import math

import torch

from minisgl import kernels


class KVCacheExhausted(RuntimeError):
    """Raised when more KV slots (or request slots) are asked for than are free."""


def zeros(shape: tuple[int, ...], dtype: torch.dtype, device: str | torch.device) -> torch.Tensor:
    """torch.zeros(shape), but on the CPU the bytes come from calloc. The C library usually serves a large
    block with fresh pages that the kernel zeroes on first touch, so a pool sized for many tokens costs
    little until it is used; torch.zeros writes every byte up front (0.2-0.4 s of a server's start here)."""
    if torch.device(device).type != "cpu":
        return torch.zeros(shape, dtype=dtype, device=device)
    import numpy as np

    nbytes = math.prod(shape) * dtype.itemsize
    raw = torch.from_numpy(np.zeros(nbytes + 64, dtype=np.uint8))
    start = -raw.data_ptr() % 64  # 64-byte aligned, as torch's own allocations
    return raw[start:start + nbytes].view(dtype).view(shape)


class ReqToTokenPool:
    """A table of [max requests, max context] int64: row r, column p holds the KV slot of position p."""

    def __init__(self, size: int, max_context_len: int, device: str | torch.device = "cpu"):
        self.size = size
        self.max_context_len = max_context_len
        self.req_to_token = zeros((size, max_context_len), torch.int64, device)
        self.free_slots: list[int] = list(range(size))

    def available_size(self) -> int:
        return len(self.free_slots)

    def alloc(self, need_size: int = 1) -> list[int]:
        if need_size < 0:
            raise ValueError(f"cannot allocate {need_size} request slots")
        if need_size > len(self.free_slots):
            raise KVCacheExhausted(
                f"request pool exhausted: asked for {need_size} request slot(s), {len(self.free_slots)} free "
                f"of {self.size} (raise --max-running-requests)"
            )
        taken, self.free_slots = self.free_slots[:need_size], self.free_slots[need_size:]
        return taken

    def free(self, req_pool_idx: int | list[int]) -> None:
        idxs = [int(req_pool_idx)] if isinstance(req_pool_idx, int) else [int(i) for i in req_pool_idx]
        for i in idxs:
            if not 0 <= i < self.size or i in self.free_slots:
                raise ValueError(f"request slot {i} is not allocated")
        if len(set(idxs)) != len(idxs):
            raise ValueError(f"freeing the same request slot twice in one call: {idxs}")
        self.free_slots.extend(idxs)

    def clear(self) -> None:
        self.free_slots = list(range(self.size))


class TokenToKVPool:
    """Per-layer K and V buffers of shape [size + 1, kv_heads, head_dim] and a free-slot allocator.

    Slot 0 is never handed out: an unused req_to_token entry (the table starts as zeros) points at it, so
    a reader past a request's length (a padded gather, masked) touches no live slot. Usable slots: 1..size.
    """

    def __init__(
        self,
        size: int,
        num_layers: int,
        num_kv_heads: int,
        head_dim: int,
        dtype: torch.dtype,
        device: str | torch.device = "cpu",
    ):
        self.size = size
        self.num_layers = num_layers
        self.dtype = dtype
        self.device = torch.device(device)
        shape = (size + 1, num_kv_heads, head_dim)
        self.k_buffer = [zeros(shape, dtype, device) for _ in range(num_layers)]
        self.v_buffer = [zeros(shape, dtype, device) for _ in range(num_layers)]
        self._is_free = torch.ones(size + 1, dtype=torch.bool)
        self._is_free[0] = False
        self.use_kernel = False  # the model runner turns the C++ kv_write on with the other CPU kernels
        self.clear()

    # ---- allocator -------------------------------------------------------------------------------
    def clear(self) -> None:
        self.free_slots = torch.arange(1, self.size + 1, dtype=torch.int64)
        self._is_free[1:] = True

    def available_size(self) -> int:
        return int(self.free_slots.numel())

    def alloc(self, need_size: int) -> torch.Tensor:
        """Take `need_size` free slots (lowest first after a clear). Raises KVCacheExhausted if short."""
        if need_size < 0:
            raise ValueError(f"cannot allocate {need_size} KV slots")
        if need_size > self.free_slots.numel():
            raise KVCacheExhausted(
                f"KV cache exhausted: asked for {need_size} slot(s), {self.free_slots.numel()} free "
                f"of {self.size} (raise --max-total-tokens)"
            )
        taken = self.free_slots[:need_size]
        self.free_slots = self.free_slots[need_size:]
        self._is_free[taken] = False
        return taken

    def free(self, free_index: torch.Tensor) -> None:
        """Return slots to the free list; refuses slots that are not allocated, or the same one twice."""
        if free_index.numel() == 0:
            return
        free_index = free_index.to(torch.int64).cpu().flatten()
        # outside 1..size first: a negative index would wrap around in _is_free, a large one overflow it
        bad = free_index[(free_index < 1) | (free_index > self.size)]
        if bad.numel() == 0:
            bad = free_index[self._is_free[free_index]]
        if bad.numel():
            raise ValueError(f"freeing KV slot(s) that are not allocated: {bad.tolist()[:8]}")
        if free_index.unique().numel() != free_index.numel():
            raise ValueError("freeing the same KV slot twice in one call")
        self._is_free[free_index] = True
        self.free_slots = torch.cat((self.free_slots, free_index))

    # ---- K/V access ------------------------------------------------------------------------------
    def set_kv_buffer(self, layer_id: int, loc: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        if self.use_kernel and k.dtype == v.dtype == self.dtype and loc.dtype == torch.int64:
            kernels.kv_write(self.k_buffer[layer_id], loc, k)  # the same copy, one C call (no torch op)
            kernels.kv_write(self.v_buffer[layer_id], loc, v)
            return
        self.k_buffer[layer_id].index_copy_(0, loc, k.to(self.dtype))  # row i of k goes to slot loc[i]
        self.v_buffer[layer_id].index_copy_(0, loc, v.to(self.dtype))

    def get_kv_buffer(self, layer_id: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.k_buffer[layer_id], self.v_buffer[layer_id]

    @staticmethod
    def bytes_per_token(num_layers: int, num_kv_heads: int, head_dim: int, dtype: torch.dtype) -> int:
        return 2 * num_layers * num_kv_heads * head_dim * torch.empty((), dtype=dtype).element_size()
