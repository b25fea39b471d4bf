"""Where the detokenizer sends what it made: with --tokenizer-worker-num N > 1, back to the tokenizer worker
that owns each request (SGLang's MultiHttpWorkerDetokenizerMixin).

Each row of a BatchStrOutput carries its worker's address (`http_worker_ipcs`), and a control reply its
asker's (`http_worker_ipc`); one output becomes one message per worker, rows kept in order. With one
TokenizerManager every address is None and the output goes out whole, as before.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import zmq

from minisgl.scheduler.io_struct import BatchStrOutput
from minisgl.server.zmq_io import PushSender


def split_by_worker(out: BatchStrOutput) -> list[tuple[str | None, BatchStrOutput]]:
    """(address, the rows for it), in the order each address first appears."""
    addresses = list(dict.fromkeys(out.http_worker_ipcs))
    if len(addresses) <= 1:
        return [(addresses[0] if addresses else None, out)]
    parts = []
    for address in addresses:
        rows = [i for i, a in enumerate(out.http_worker_ipcs) if a == address]
        columns = {f.name: [getattr(out, f.name)[i] for i in rows] for f in dataclasses.fields(out)
                   if len(getattr(out, f.name)) == len(out.rids)}
        parts.append((address, dataclasses.replace(out, **columns)))
    return parts


class WorkerSenders:
    """One PushSender per tokenizer address, made when a message first goes there."""

    def __init__(self, context: zmq.Context, default_address: str):
        self.context = context
        self.default_address = default_address
        self.senders: dict[str, PushSender] = {}

    def send(self, address: str | None, obj: Any) -> None:
        address = address or self.default_address
        if address not in self.senders:
            self.senders[address] = PushSender(self.context, address, dst="tokenizer_manager")
        self.senders[address].send(obj)

    def close(self) -> None:
        for sender in self.senders.values():
            sender.close()
