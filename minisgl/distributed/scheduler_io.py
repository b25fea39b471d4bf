"""How tensor-parallel scheduler ranks get the same inputs (SGLang's `broadcast_pyobj` in `recv_requests`).

Rank 0 alone receives from the TokenizerManager; every round it broadcasts what it received (often
nothing) to the other ranks, which take that as their own input. Since every rank then runs the same
scheduling decisions on the same inputs, the ranks stay in step: each forward is the same batch on
every rank, and only the model's collectives pass tensors. Only rank 0 sends to the detokenizer.
"""

from __future__ import annotations

from typing import Any

from minisgl.distributed.communication_op import broadcast_pyobj
from minisgl.distributed.parallel_state import get_tp_group


class TpBroadcastReceiver:
    """The scheduler's `recv_from_tokenizer` on every rank: rank 0 wraps the real socket, others have none."""

    def __init__(self, inner=None):
        self.inner = inner  # rank 0's PullReceiver; None on the other ranks
        self.group = get_tp_group()

    def recv_all(self, block: bool = False) -> list:
        reqs = self.inner.recv_all(block) if self.group.rank == 0 else None
        return broadcast_pyobj(reqs, self.group.rank, self.group.cpu_group)

    def close(self) -> None:
        if self.inner is not None:
            self.inner.close()


class NoSender:
    """`send_to_detokenizer` on ranks other than 0: their replies are rank 0's, which rank 0 sends."""

    def send(self, obj: Any) -> None:
        pass

    def close(self) -> None:
        pass
