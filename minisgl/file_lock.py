"""One process at a time for work whose result several processes share through a cache folder.

A server's processes, and the test suite's workers, start together; on an empty cache each would build the
same thing (the CPU kernels, the GGUF tokenizer) side by side. Instead the first takes the lock and builds,
the others wait, then find its result. The lock is the operating system's (flock on a lock file), so it is
released however its holder ends. The lock file stays: removing it could let a late process lock a new file
while an earlier one still waits on the old.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def exclusive(target: Path) -> Iterator[None]:
    """Hold the lock of `target` (the file `.<name>.lock` beside it). Where that file cannot be made (a
    read-only cache), there is nothing to share: no lock."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(target.parent / f".{target.name}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock
