"""PortArgs: the three ZeroMQ addresses the server's processes talk over, in one private folder.

Each address belongs to the process that receives on it (its PULL socket binds there); senders connect.
"""

from __future__ import annotations

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

    def remove(self) -> None:
        """Delete the socket folder; safe to call twice or from several processes."""
        if Path(self.ipc_dir).exists():
            shutil.rmtree(self.ipc_dir, ignore_errors=True)
