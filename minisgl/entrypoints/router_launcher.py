"""RouterLauncher: the processes of `minisgl router` (router_cli.py).

    start N `minisgl serve --port 0`   each prints "ready at http://HOST:PORT" once it serves
    start the router                   python -m sglang_router.launch_router --worker-urls ... --policy ...
    wait for the router's /health      then print one "ready" line and watch the children
    on SIGINT/SIGTERM or a death       SIGTERM to the router and every worker, wait, SIGKILL what is left

With pd_disaggregation: worker 0 is `--disaggregation-mode prefill` (its bootstrap server on a free port it
binds itself and names on its ready line), worker 1 `--disaggregation-mode decode`, and the router runs
`--pd-disaggregation --prefill URL PORT --decode URL`.

Every child runs in its own session (a Ctrl-C in the terminal reaches the launcher alone, which then sends one
SIGTERM to each child) and gets SIGTERM from the kernel if the launcher itself is killed (PR_SET_PDEATHSIG),
so no worker or router outlives it.
"""

from __future__ import annotations

import ctypes
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

READY_RE = re.compile(r"minisgl serve: ready at (http://\S+?) ")
BOOTSTRAP_RE = re.compile(r"; bootstrap port (\d+)")  # on a PD prefill server's ready line
ROUTER_VENV_PYTHON = Path(".venv-router") / "bin" / "python"
STOP_TIMEOUT_S = 40.0  # a worker's graceful shutdown (30 s by default) plus its children's exit
ROUTER_GRACE_S = 5  # the router's own default grace period is 180 s
POLL_S = 0.2
PORT_TRIES = 3  # --port 0: ports picked for the router before giving up (another process may take one first)


class RouterLaunchError(RuntimeError):
    """A launch that cannot go on: no router installed, a worker that died or never became ready."""


class _RouterExited(RouterLaunchError):
    """The router process ended before it answered /health."""


class _Interrupted(Exception):
    """SIGINT or SIGTERM during start-up: stop everything, as asked (exit status 0, like `minisgl serve`)."""


def find_router_python(given: str | None) -> str:
    """The Python that can import sglang_router: --router-python, else .venv-router here or in the
    checkout."""
    checkout = Path(__file__).resolve().parents[2]
    candidates = [Path(given)] if given else [Path.cwd() / ROUTER_VENV_PYTHON, checkout / ROUTER_VENV_PYTHON]
    for python in candidates:
        if python.exists():
            probe = subprocess.run([str(python), "-c", "import sglang_router"], capture_output=True,
                                   text=True)
            if probe.returncode == 0:
                return str(python)
            why = (probe.stderr.strip().splitlines() or ["?"])[-1]
            raise RouterLaunchError(f"{python} cannot import sglang_router ({why}); "
                                    "run `make router-env` or pass --router-python")
    where = given or " or ".join(str(c) for c in candidates)
    raise RouterLaunchError(f"no Python with sglang-router at {where}: run `make router-env` (it installs "
                            "sglang-router into .venv-router) or pass --router-python PATH")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


try:  # loaded before any fork: the child only makes the call
    _LIBC = ctypes.CDLL("libc.so.6", use_errno=True)
except OSError:  # not Linux: children still get SIGTERM from stop(), only a SIGKILLed launcher leaks them
    _LIBC = None


def _die_with_parent() -> None:
    """In the child, before exec: SIGTERM when the launcher dies, whatever kills it (PR_SET_PDEATHSIG = 1)."""
    if _LIBC is not None:
        _LIBC.prctl(1, signal.SIGTERM)


class RouterLauncher:
    def __init__(self, router_python: str, num_workers: int, worker_urls: list[str], serve_argv: list[str],
                 trace_dir: str | None, policy: str, host: str, port: int, router_log_level: str,
                 router_args: list[str], startup_timeout: float, pd_disaggregation: bool = False):
        self.router_python, self.num_workers, self.worker_urls = router_python, num_workers, list(worker_urls)
        self.serve_argv, self.trace_dir, self.policy = serve_argv, trace_dir, policy
        self.host, self.port, self.router_log_level = host, port, router_log_level
        self.router_args, self.startup_timeout = router_args, startup_timeout
        self.pd_disaggregation = pd_disaggregation
        # the prefill server's bootstrap server: it binds a free port itself and names it on its ready line
        self.bootstrap_port: int | None = None
        self.workers: list[subprocess.Popen] = []
        self.router: subprocess.Popen | None = None
        self.ready_urls: dict[int, str] = {}
        self.signum: int | None = None
        self.pick_port = port == 0  # the router cannot bind port 0 itself: a free one is picked for it
        self.picked_metrics_port = False  # whether its --prometheus-port was picked here too

    # ---- the whole run ----------------------------------------------------------------------------
    def run(self) -> int:
        old = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            self._start_workers()
            self._wait_workers_ready()
            self._start_router_on_a_port()
            over = (f"prefill {self.worker_urls[0]} (bootstrap port {self.bootstrap_port}), decode "
                    f"{self.worker_urls[1]}" if self.pd_disaggregation
                    else f"{len(self.worker_urls)} workers: {' '.join(self.worker_urls)}")
            print(f"minisgl router: ready at http://{self.host}:{self.port} ({self.policy} over {over})",
                  flush=True)
            return self._watch()
        except RouterLaunchError as e:
            print(f"minisgl router: error: {e}", file=sys.stderr, flush=True)
            return 1
        except _Interrupted:
            print(f"minisgl router: {signal.Signals(self.signum).name} during start-up: stopping", flush=True)
            return 0
        finally:
            self.stop()
            for sig, handler in old.items():
                signal.signal(sig, handler)

    def _on_signal(self, signum: int, frame) -> None:
        self.signum = signum

    # ---- workers ----------------------------------------------------------------------------------
    def _start_workers(self) -> None:
        if self.trace_dir == "":
            self.trace_dir = f"minisgl-trace-{time.strftime('%Y%m%d-%H%M%S')}"
        for i in range(self.num_workers):
            argv = [sys.executable, "-m", "minisgl.cli", "serve", "--port", "0", *self.serve_argv]
            name = f"worker-{i}"
            if self.pd_disaggregation:
                name = ("prefill", "decode")[i]
                argv += ["--disaggregation-mode", name]
                argv += ["--disaggregation-bootstrap-port", "0"] if i == 0 else []
            if self.trace_dir is not None:
                argv += ["--trace", str(Path(self.trace_dir) / name)]
            proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                    bufsize=1, start_new_session=True, preexec_fn=_die_with_parent)
            self.workers.append(proc)
            threading.Thread(target=self._pump, args=(i, proc), name=f"worker-{i}-output",
                             daemon=True).start()

    def _pump(self, i: int, proc: subprocess.Popen) -> None:
        """Echo a worker's output with its number in front, and catch its ready line."""
        for line in proc.stdout:
            match = READY_RE.search(line)
            if match:
                bootstrap = BOOTSTRAP_RE.search(line)
                if bootstrap:
                    self.bootstrap_port = int(bootstrap.group(1))
                self.ready_urls[i] = match.group(1)
            sys.stdout.write(f"[worker {i}] {line}")
            sys.stdout.flush()

    def _wait_workers_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        while len(self.ready_urls) < self.num_workers:
            for i, proc in enumerate(self.workers):
                if proc.poll() is not None:
                    raise RouterLaunchError(f"worker {i} exited with status {proc.returncode} before it was "
                                            "ready")
            if time.monotonic() > deadline:
                raise RouterLaunchError(f"the workers were not ready within {self.startup_timeout:g} s")
            self._check_signal()
            time.sleep(POLL_S)
        self.worker_urls += [self.ready_urls[i] for i in range(self.num_workers)]

    def _check_signal(self) -> None:
        if self.signum is not None:
            raise _Interrupted()

    # ---- the router -------------------------------------------------------------------------------
    def router_argv(self) -> list[str]:
        if self.pd_disaggregation:
            workers = ["--pd-disaggregation", "--prefill", self.worker_urls[0], str(self.bootstrap_port),
                       "--decode", self.worker_urls[1]]
        else:
            workers = ["--worker-urls", *self.worker_urls]
        argv = [self.router_python, "-m", "sglang_router.launch_router", "--host", self.host,
                "--port", str(self.port), *workers, "--policy", self.policy, "--log-level",
                self.router_log_level]
        given = " ".join(self.router_args)
        self.picked_metrics_port = "--prometheus-port" not in given
        if self.picked_metrics_port:  # its default (29000) would clash with a second router
            argv += ["--prometheus-port", str(free_port())]
        if "--shutdown-grace-period-secs" not in given:
            argv += ["--shutdown-grace-period-secs", str(ROUTER_GRACE_S)]
        return argv + self.router_args

    def _start_router_on_a_port(self) -> None:
        """Start the router and wait until it answers. The router takes no port 0 and names no port it
        bound, so for --port 0 (and for its metrics port) a free port is picked here; if another process
        takes one before the router binds it, the router exits at once and is started on new ports."""
        for attempt in range(1, PORT_TRIES + 1):
            if self.pick_port:
                self.port = free_port()
            self._start_router()
            try:
                return self._wait_router_ready()
            except _RouterExited as e:
                if attempt == PORT_TRIES or not (self.pick_port or self.picked_metrics_port):
                    raise RouterLaunchError(str(e)) from None
                print(f"minisgl router: {e} (a port it was given was taken meanwhile?): trying new ports",
                      file=sys.stderr, flush=True)

    def _start_router(self) -> None:
        self.router = subprocess.Popen(self.router_argv(), start_new_session=True,
                                       preexec_fn=_die_with_parent)

    def _wait_router_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        url = f"http://{'127.0.0.1' if self.host in ('0.0.0.0', '::') else self.host}:{self.port}/health"
        while True:
            if self.router.poll() is not None:
                raise _RouterExited(f"the router exited with status {self.router.returncode}")
            try:
                with urllib.request.urlopen(url, timeout=2) as response:
                    if response.status == 200:
                        return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RouterLaunchError(f"the router did not answer {url} within {self.startup_timeout:g} s")
            self._check_signal()
            time.sleep(POLL_S)

    # ---- serving ----------------------------------------------------------------------------------
    def _watch(self) -> int:
        """Until a signal (exit 0) or the router's death (exit 1). A worker that dies is announced and left
        to the router, which marks it unhealthy and routes around it, as it would on another machine."""
        announced: set[int] = set()
        while self.signum is None:
            if self.router.poll() is not None:
                print(f"minisgl router: the router exited with status {self.router.returncode}",
                      file=sys.stderr)
                return 1
            for i, proc in enumerate(self.workers):
                if proc.poll() is not None and i not in announced:
                    announced.add(i)
                    print(f"minisgl router: worker {i} ({self.worker_urls[i]}) exited with status "
                          f"{proc.returncode}; the router routes around it", file=sys.stderr, flush=True)
            time.sleep(POLL_S)
        return 0

    def stop(self) -> None:
        """SIGTERM to every child still running, then wait; SIGKILL whatever outlives STOP_TIMEOUT_S."""
        children = [p for p in [self.router, *self.workers] if p is not None]
        for proc in children:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for proc in children:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
