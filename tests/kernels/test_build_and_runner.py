"""Building the kernels (cache, clear errors) and choosing them in the ModelRunner (--cpu-kernels)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from minisgl import kernels
from minisgl.kernels import build
from minisgl.layers.attention.cpu_paged_backend import CpuPagedAttnBackend
from minisgl.layers.attention.hybrid_attn_backend import HybridAttnBackend
from minisgl.layers.attention.torch_native_backend import TorchNativeAttnBackend
from minisgl.layers.layernorm import RMSNorm
from minisgl.model_executor.model_runner import ModelRunner
from minisgl.server_args import ServerArgs
from tests.kernels.conftest import needs_compiler


@needs_compiler
def test_built_once_then_taken_from_the_cache(tmp_path: Path, monkeypatch):
    monkeypatch.setenv(build.CACHE_ENV, str(tmp_path))
    path = build.library_path()
    assert path.parent == tmp_path and path.name.startswith("cpu_kernels-") and path.suffix == ".so"
    built_at = path.stat().st_mtime_ns
    assert build.library_path() == path and path.stat().st_mtime_ns == built_at
    # no temporary file left behind; the build's lock file stays (see minisgl/file_lock.py)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([path.name, f".{path.name}.lock"])


@needs_compiler
@pytest.mark.skipif(shutil.which("nm") is None, reason="needs binutils' nm to list the library's symbols")
def test_only_the_c_entry_points_leave_the_library():
    """The C++ names stay hidden (csrc/common.h): two builds in one process, as test_packed_linear.py's bits
    test loads them, would otherwise share one copy of each inline function and `thread_local` buffer."""
    listed = subprocess.run(["nm", "-DC", "--defined-only", str(build.library_path())], capture_output=True,
                            text=True, check=True).stdout
    names = [line.split(maxsplit=2)[-1] for line in listed.splitlines()]
    assert "q4_linear_bf16" in names and "graph_replay" in names
    assert not [name for name in names if "minisgl" in name]


@needs_compiler
def test_the_library_names_its_vector_loop():
    """What the benchmarks print beside their figures: the loop this CPU's build runs, and its group width."""
    assert kernels.load()
    loop = kernels.packed_loop()
    assert f"{kernels._group} columns a group" in loop
    assert ("AVX-512" in loop) == (kernels._group == 16)


@needs_compiler
@pytest.mark.skipif(not os.path.exists("/proc/locks"), reason="needs Linux's /proc/locks to see a waiter")
def test_processes_starting_together_compile_once(tmp_path: Path, monkeypatch):
    """While one process builds (this test holds the build's lock, standing in for it), another that needs
    the kernels waits; it then loads the library the first one wrote, without compiling again."""
    import time

    from minisgl.file_lock import exclusive

    monkeypatch.setenv(build.CACHE_ENV, str(tmp_path / "built"))
    built = build.library_path()  # the library the "first process" will have made
    cache = tmp_path / "cache"
    path = cache / built.name
    code = "from minisgl.kernels import build; print(build.library_path())"
    with exclusive(path):
        other = subprocess.Popen([sys.executable, "-c", code], env={**os.environ, build.CACHE_ENV: str(cache)},
                                 stdout=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while f" {other.pid} " not in "".join(line for line in open("/proc/locks") if "->" in line):
            assert other.poll() is None and time.monotonic() < deadline, "the second process did not wait"
            time.sleep(0.05)  # until the kernel lists it as blocked on the lock
        shutil.copy(built, path)  # what the first process leaves before it lets go
        inode = path.stat().st_ino
    out, _ = other.communicate(timeout=120)
    assert other.returncode == 0 and out.strip() == str(path)
    assert path.stat().st_ino == inode  # the same file: not compiled and replaced
    assert sorted(p.name for p in cache.iterdir()) == sorted([path.name, f".{path.name}.lock"])


def test_no_compiler_is_one_clear_line(tmp_path: Path, monkeypatch):
    monkeypatch.setenv(build.CACHE_ENV, str(tmp_path))
    monkeypatch.setenv("CXX", "no-such-compiler-here")
    with pytest.raises(build.KernelBuildError, match="no C\\+\\+ compiler found"):
        build.library_path()


@needs_compiler
def test_a_compile_error_names_the_compiler_and_its_first_line(tmp_path: Path, monkeypatch):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "broken.cpp").write_text("this is not C++;\n")
    monkeypatch.setattr(build, "SOURCE_DIR", tmp_path / "src")
    monkeypatch.setenv(build.CACHE_ENV, str(tmp_path / "cache"))
    with pytest.raises(build.KernelBuildError, match="failed to compile .*broken.cpp"):
        build.library_path()
    # the failed output is removed (the build's lock file stays)
    assert [p.name for p in (tmp_path / "cache").iterdir() if not p.name.endswith(".lock")] == []


def test_the_cache_key_covers_every_source_and_header(tmp_path: Path, monkeypatch):
    """The kernels are several files built together: an edit to any of them, the shared header
    included, or a new file, must give a new library name (else a stale build would be loaded)."""
    src = tmp_path / "src"
    shutil.copytree(build.SOURCE_DIR, src, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(build, "SOURCE_DIR", src)
    assert [p.name for p in build.sources()] == sorted(p.name for p in src.glob("*.cpp")) and build.sources()
    seen = {build.source_hash()}
    for name in sorted(p.name for p in src.iterdir()):
        (src / name).write_text((src / name).read_text() + "\n")
        seen.add(build.source_hash())
    (src / "extra.cpp").write_text("")
    seen.add(build.source_hash())
    assert len(seen) == len(list(src.iterdir())) + 1


def test_without_a_compiler_auto_falls_back_to_torch(tmp_path: Path):
    code = ("from minisgl import kernels; ok = kernels.load(); "
            "print(ok); print(kernels.unavailable_reason())")
    env = {**os.environ, "CXX": "no-such-compiler-here", build.CACHE_ENV: str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0] == "False"
    assert "no C++ compiler found" in out.stdout


@needs_compiler
@pytest.mark.slow
def test_runner_modes(bundled_source, model_config, runner_fp32):
    backend = runner_fp32.attn_backend
    assert runner_fp32.use_cpu_kernels and isinstance(backend, HybridAttnBackend)
    assert type(backend.decode_backend) is CpuPagedAttnBackend
    assert type(backend.prefill_backend) is TorchNativeAttnBackend
    off = ModelRunner(model_config, bundled_source, ServerArgs(dtype="float32", max_total_tokens=64,
                                                               max_running_requests=2, cpu_kernels="off"),
                      model=runner_fp32.model)
    assert not off.use_cpu_kernels and type(off.attn_backend) is TorchNativeAttnBackend
    with pytest.raises(RuntimeError, match="--cpu-kernels on needs --device cpu and float32 or bfloat16, "
                                           "not cpu float16"):
        ModelRunner(model_config, bundled_source, ServerArgs(dtype="float16", max_total_tokens=64,
                                                             max_running_requests=2, cpu_kernels="on"))


@needs_compiler
@pytest.mark.slow
def test_a_runner_sharing_weights_keeps_its_own_kernel_choice(bundled_source, model_config, runner_fp32,
                                                              chat_prompt_ids):
    """The choice is made once per runner: a second runner over the same weights gets its own module
    objects (the tensors themselves are not copied), so running one never switches the other."""
    from minisgl.model_executor.static_generate import greedy_generate

    off = ModelRunner(model_config, bundled_source, ServerArgs(dtype="float32", max_total_tokens=512,
                                                               max_running_requests=4, cpu_kernels="off"),
                      model=runner_fp32.model)
    fast_params, off_params = dict(runner_fp32.model.named_parameters()), dict(off.model.named_parameters())
    assert fast_params.keys() == off_params.keys()
    assert all(off_params[name] is p for name, p in fast_params.items())
    fast_norms = [m for m in runner_fp32.model.modules() if isinstance(m, RMSNorm)]
    off_norms = [m for m in off.model.modules() if isinstance(m, RMSNorm)]
    want = greedy_generate(off, [chat_prompt_ids[0]], 4)
    assert greedy_generate(runner_fp32, [chat_prompt_ids[0]], 4) == want
    greedy_generate(off, [chat_prompt_ids[0]], 2)
    assert all(m.use_kernel for m in fast_norms) and not any(m.use_kernel for m in off_norms)


def test_bad_flag_value_is_refused():
    with pytest.raises(ValueError, match="--cpu-kernels must be auto, on or off"):
        ServerArgs(cpu_kernels="maybe").validate()
