"""ForwardBatch: everything one forward pass reads, and ForwardMode.

Two kinds of index travel side by side and must never be confused:
- `positions`: the LOGICAL index of each row inside its own request (0, 1, 2, ...). RoPE uses it.
- `out_cache_loc`: the STORAGE slot in the KV pool where each row's K/V is written. Attention uses it.
A request's positions are always contiguous; its KV slots can be anywhere in the pool.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum, auto
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from minisgl.mem_cache.memory_pool import ReqToTokenPool, TokenToKVPool


class ForwardMode(IntEnum):
    EXTEND = auto()  # prefill: new rows appended after a (possibly cached) prefix
    DECODE = auto()  # one new row per request
    MIXED = auto()  # a prefill batch that also carries running requests' decode rows as 1-token extends
    IDLE = auto()  # nothing to run
    # speculative decoding: each request's last token and its draft tokens as extend rows, logits for every
    # row
    TARGET_VERIFY = auto()

    def is_extend(self) -> bool:
        return self in (ForwardMode.EXTEND, ForwardMode.MIXED)

    def is_decode(self) -> bool:
        return self == ForwardMode.DECODE

    def is_target_verify(self) -> bool:
        return self == ForwardMode.TARGET_VERIFY

    def has_extend_rows(self) -> bool:
        """Rows prefix_len .. seq_len - 1 per request (EXTEND, MIXED and TARGET_VERIFY), not one row each."""
        return self.is_extend() or self.is_target_verify()


def compute_positions(
    forward_mode: ForwardMode, seq_lens: list[int], extend_prefix_lens: list[int] | None = None
) -> torch.Tensor:
    """Logical positions of this round's rows. Extend: prefix_len .. seq_len-1 per request. Decode:
    seq_len-1."""
    if forward_mode.has_extend_rows():
        assert extend_prefix_lens is not None
        return torch.cat([torch.arange(p, s, dtype=torch.int64)
                          for p, s in zip(extend_prefix_lens, seq_lens)])
    return torch.tensor([s - 1 for s in seq_lens], dtype=torch.int64)


@dataclass
class ForwardBatch:
    forward_mode: ForwardMode
    batch_size: int
    input_ids: torch.Tensor  # [num_rows] token ids of this round's rows
    positions: torch.Tensor  # [num_rows] logical position of each row in its request
    out_cache_loc: torch.Tensor  # [num_rows] KV slot each row writes to
    req_pool_indices: torch.Tensor  # [batch] row of req_to_token for each request
    seq_lens: torch.Tensor  # [batch] tokens in each request after this round
    seq_lens_cpu: list[int]
    req_to_token_pool: ReqToTokenPool
    token_to_kv_pool: TokenToKVPool
    attn_backend: Any = None
    # EXTEND / MIXED / TARGET_VERIFY only
    extend_prefix_lens: list[int] | None = None  # tokens already in the KV cache (not recomputed)
    extend_seq_lens: list[int] | None = None  # rows this round, per request
    extend_start_loc: list[int] | None = None  # first row of each request in input_ids
    # TARGET_VERIFY only: each row read as a decode query of its own (the CPU kernel's attention): its
    # request's req_to_token row, and the tokens it sees (its position + 1: its prefix, the rows before it)
    row_req_pool_indices: torch.Tensor | None = None
    row_seq_lens: torch.Tensor | None = None
    # EXTEND / MIXED, for requests that ask for their prompt's logprobs: the rows whose logits are kept too
    # (LogitsProcessor puts them in input_logits, beside the sampled rows' logits it returns)
    input_logprob_rows: list[int] | None = None
    input_logits: torch.Tensor | None = None

    @classmethod
    def init_new(cls, batch: Any, model_runner: Any) -> ForwardBatch:
        """Build from a ScheduleBatch (or anything with its fields): derive positions and extend offsets."""
        seq_lens = [int(s) for s in batch.seq_lens]
        rows = batch.forward_mode.has_extend_rows()
        prefix_lens = list(batch.prefix_lens) if rows else None
        extend_lens = list(batch.extend_lens) if rows else None
        check_rows(batch, seq_lens, prefix_lens, extend_lens)
        fb = cls(
            forward_mode=batch.forward_mode,
            batch_size=len(seq_lens),
            input_ids=torch.as_tensor(batch.input_ids, dtype=torch.int64),
            positions=compute_positions(batch.forward_mode, seq_lens, prefix_lens),
            out_cache_loc=torch.as_tensor(batch.out_cache_loc, dtype=torch.int64),
            req_pool_indices=torch.as_tensor(batch.req_pool_indices, dtype=torch.int64),
            seq_lens=torch.tensor(seq_lens, dtype=torch.int64),
            seq_lens_cpu=seq_lens,
            req_to_token_pool=model_runner.req_to_token_pool,
            token_to_kv_pool=model_runner.token_to_kv_pool,
            attn_backend=model_runner.attn_backend,
            extend_prefix_lens=prefix_lens,
            extend_seq_lens=extend_lens,
        )
        if extend_lens is not None:
            fb.extend_start_loc = _exclusive_cumsum(extend_lens)
        if batch.forward_mode.is_target_verify():
            fb.row_req_pool_indices = fb.req_pool_indices.repeat_interleave(torch.tensor(extend_lens))
            fb.row_seq_lens = fb.positions + 1
        return fb

    def last_row_indices(self) -> torch.Tensor:
        """The row of each request whose logits are sampled: its last row of this round."""
        assert self.extend_seq_lens is not None and self.extend_start_loc is not None
        return torch.tensor([s + n - 1 for s, n in zip(self.extend_start_loc, self.extend_seq_lens)])


def check_rows(batch: Any, seq_lens: list[int], prefix_lens: list[int] | None,
               extend_lens: list[int] | None) -> None:
    """A batch whose lengths disagree would make attention read KV slots outside its requests' rows (the C++
    kernels do not check), so it is refused here with what disagrees. A lab's component can build one."""
    n, rows = len(seq_lens), len(batch.input_ids)
    if len(batch.req_pool_indices) != n:
        raise ValueError(f"{batch.forward_mode.name} batch: {n} seq_lens but "
                         f"{len(batch.req_pool_indices)} req_pool_indices")
    if len(batch.out_cache_loc) != rows:
        raise ValueError(f"{batch.forward_mode.name} batch: {rows} input ids but {len(batch.out_cache_loc)} "
                         "out_cache_loc slots")
    if extend_lens is None:
        if rows != n:
            raise ValueError(f"{batch.forward_mode.name} batch: {rows} input ids for {n} requests")
        return
    if len(prefix_lens) != n or len(extend_lens) != n or sum(extend_lens) != rows:
        raise ValueError(f"{batch.forward_mode.name} batch: {n} requests, {len(prefix_lens)} prefix_lens, "
                         f"extend_lens {extend_lens} (sum {sum(extend_lens)}) for {rows} input ids")
    for i, (seq, prefix, extend) in enumerate(zip(seq_lens, prefix_lens, extend_lens)):
        if prefix < 0 or extend < 1 or prefix + extend != seq:
            raise ValueError(f"{batch.forward_mode.name} batch, request {i}: prefix_len {prefix} + "
                             f"extend_len {extend} must equal its seq_len {seq}")


def _exclusive_cumsum(xs: list[int]) -> list[int]:
    out, acc = [], 0
    for x in xs:
        out.append(acc)
        acc += x
    return out
