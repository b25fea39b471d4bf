"""PortArgs: the three ZeroMQ addresses the server's processes talk over, in one private folder.

With --dp-size N > 1 the DataParallelController binds scheduler_input_ipc_name instead of the scheduler,
and each rank's scheduler binds its own address (`for_dp_rank`).

Each address belongs to the process that receives on it (its PULL socket binds there); senders connect.
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class PortArgs:
    ipc_dir: str  # made with mode 0700, so no other user can send the processes messages
    scheduler_input_ipc_name: str  # tokenizer manager -> scheduler
    detokenizer_ipc_name: str  # scheduler -> detokenizer
    tokenizer_ipc_name: str  # detokenizer -> tokenizer manager

    @classmethod
    def init_new(cls) -> PortArgs:
        folder = tempfile.mkdtemp(prefix="minisgl-ipc-")
        return cls(
            ipc_dir=folder,
            scheduler_input_ipc_name=f"ipc://{folder}/scheduler_input",
            detokenizer_ipc_name=f"ipc://{folder}/detokenizer",
            tokenizer_ipc_name=f"ipc://{folder}/tokenizer",
        )

    def for_dp_rank(self, dp_rank: int) -> PortArgs:
        """The addresses one data-parallel rank's scheduler uses: its own input (the DataParallelController
        sends there), the shared detokenizer and tokenizer manager."""
        address = f"ipc://{self.ipc_dir}/scheduler_input_dp{dp_rank}"
        return dataclasses.replace(self, scheduler_input_ipc_name=address)

    def tokenizer_worker_ipc_name(self, worker_id: int) -> str:
        """detokenizer -> tokenizer worker `worker_id` (--tokenizer-worker-num > 1): each receives apart."""
        return f"ipc://{self.ipc_dir}/tokenizer_worker{worker_id}"

    @property
    def dp_controller_load_ipc_name(self) -> str:
        """scheduler ranks -> DataParallelController: each rank's load, whenever it changed."""
        return f"ipc://{self.ipc_dir}/dp_controller_load"

    def remove(self) -> None:
        """Delete the socket folder; safe to call twice or from several processes."""
        if Path(self.ipc_dir).exists():
            shutil.rmtree(self.ipc_dir, ignore_errors=True)
