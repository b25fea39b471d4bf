"""Compile the kernels in csrc/ once per machine and keep the library in a cache folder.

The kernels live one concern to a file (norm.cpp, rotary.cpp, activation.cpp, attention.cpp,
sampling.cpp, q8_0_linear.cpp, q4_linear.cpp, graph.cpp; common.h, which they all include, packed_blocks.h
and packed_linear.h) and are built together into one library, in a second or two with g++ (no torch
headers: the kernels see raw pointers). The library's name carries a hash of every file in csrc/ (names
and contents, headers included), the compiler's version, the flags and this CPU's feature flags, so an
edit to any of them, a new compiler or another machine gets its own build. Several processes may build
at once: each writes its own temporary file and renames it into place.
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import platform
import shutil
import subprocess
import tempfile
from pathlib import Path

from minisgl.file_lock import exclusive

logger = logging.getLogger(__name__)

SOURCE_DIR = Path(__file__).with_name("csrc")
# -fno-math-errno and -fno-trapping-math: no errno and no floating-point exception flags to keep, which is
# what lets a loop with a float comparison in it (exp_approx's clamps) be vectorized; neither changes a value
FLAGS = ["-O3", "-march=native", "-fopenmp", "-fno-math-errno", "-fno-trapping-math", "-std=c++17", "-shared",
         "-fPIC"]
CACHE_ENV = "MINISGL_KERNEL_CACHE"


class KernelBuildError(RuntimeError):
    """Why the kernels cannot be used here, in one line."""


def cache_dir() -> Path:
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "minisgl" / "kernels"


def _cpu_flags() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                return line
    except OSError:
        pass
    return platform.processor()


def _compiler() -> str:
    cxx = shutil.which(os.environ.get("CXX", "g++"))
    if cxx is None:
        raise KernelBuildError("no C++ compiler found (install g++, or set CXX), so the CPU kernels cannot "
                               "be built")
    return cxx


def sources() -> list[Path]:
    """The files compiled (every .cpp of SOURCE_DIR), in a fixed order."""
    return sorted(SOURCE_DIR.glob("*.cpp"))


def source_hash() -> str:
    """A hash of every source and header in SOURCE_DIR, by name and content: a changed header changes it."""
    key = hashlib.sha256()
    for path in sorted(p for p in SOURCE_DIR.iterdir() if p.suffix in (".cpp", ".h")):
        key.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return key.hexdigest()


def library_path() -> Path:
    """Where the build for this source, compiler and CPU lives (built there if missing)."""
    cxx = _compiler()
    try:
        version = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError) as e:
        raise KernelBuildError(f"cannot run the C++ compiler {cxx}: {e}") from None
    key = hashlib.sha256()
    for part in (source_hash().encode(), version.encode(), " ".join(FLAGS).encode(),
                 platform.machine().encode(), _cpu_flags().encode()):
        key.update(part)
    folder = cache_dir()
    path = folder / f"cpu_kernels-{key.hexdigest()[:16]}.so"
    if not path.exists():
        # processes starting together: one compiles, the others wait and load its library
        with exclusive(path):
            if not path.exists():
                _compile(cxx, folder, path)
    return path


def _compile(cxx: str, folder: Path, path: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise KernelBuildError(f"cannot create the kernel cache folder {folder}: {e} (set "
                               f"{CACHE_ENV})") from None
    fd, tmp = tempfile.mkstemp(prefix=".build-", suffix=".so", dir=folder)
    os.close(fd)
    try:
        logger.info("building the CPU kernels with %s into %s", cxx, folder)
        files = [str(p) for p in sources()]
        done = subprocess.run([cxx, *FLAGS, *files, "-o", tmp], capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            first = (done.stderr.strip().splitlines() or ["no output"])[0]
            raise KernelBuildError(f"the CPU kernels failed to compile ({cxx}): {first}")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def load_library() -> ctypes.CDLL:
    path = library_path()
    try:
        return ctypes.CDLL(str(path))
    except OSError as e:
        raise KernelBuildError(f"cannot load the CPU kernels from {path}: {e}") from None
