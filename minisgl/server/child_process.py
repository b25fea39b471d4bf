"""What every child process (scheduler, detokenizer) sets up first: signals, logging, tracing, and a
watch on its parent, so that no child outlives the server however the server ends."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import threading
import time
from typing import Any, NoReturn

from tracer.api import tracer

PARENT_POLL_S = 0.5


def setup_child_process(name: str, log_level: str, trace_dir: str | None, trace_level: int,
                        ipc_dir: str) -> None:
    # Ctrl-C reaches the whole process group; the parent alone decides, and then sends SIGTERM
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    logging.basicConfig(level=log_level.upper(),
                        format=f"[{name} %(process)d] %(levelname)s %(name)s: %(message)s")
    if trace_dir:
        tracer.configure(trace_dir, name, trace_level)
    _watch_parent(os.getppid(), ipc_dir)


def _exit_on_sigterm(signum: int, frame: Any) -> NoReturn:
    """SystemExit instead of the default kill, so atexit handlers run and the trace file is flushed."""
    raise SystemExit(0)


def _watch_parent(parent_pid: int, ipc_dir: str) -> None:
    """If the parent dies without cleaning up (SIGKILL), its children are re-parented: notice and leave."""

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(PARENT_POLL_S)
        shutil.rmtree(ipc_dir, ignore_errors=True)  # nobody else is left to remove the sockets
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the main thread may be inside a long forward; if SIGTERM did not end it, do
        os._exit(1)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0]}" if text else type(e).__name__
