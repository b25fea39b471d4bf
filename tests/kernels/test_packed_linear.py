"""The GGUF block kernels over packed weights (kernels/csrc/packed_blocks.h, packed_linear.h). bfloat16 x is
made int16 per block of 32 with a power-of-two step, and the products are integers.

What it promises, checked on Q4_0, Q4_1 and Q8_0 blocks, with several rows and with a number of columns
that leaves the last group of 8 short:
- packing keeps every weight: the float32 product with the identity is the dequantized weight;
- its result is the float32 path's (each weight made float, x times it in float32), rounded to bfloat16,
  give or take one bfloat16 step and what quantizing x can move: each value by at most half its block's
  step, 2^-15 of the block's largest |x|, times |w|;
- most results are bit-equal to that rounding;
- a row's result does not depend on the rows multiplied with it, nor on the threads, nor on the CPU: the
  plain C++ loop gives the bits of the vector one;
- an inf or NaN in a row of x makes that row's results NaN, as a float product would.
"""

from __future__ import annotations

import ctypes
import platform
import subprocess

import numpy as np
import pytest
import torch

from minisgl import kernels
from minisgl.kernels import build, dequant_gemm

pytestmark = pytest.mark.skipif(not kernels.load(), reason="the C++ cpu kernels did not build here")


def _quantized(kind: str, n: int, k: int, seed: int):
    """(product function of x, float32 weight [n, k]) for gguf's own quantization of random weights."""
    from gguf.constants import GGMLQuantizationType
    from gguf.quants import dequantize, quantize

    g = np.random.default_rng(seed)
    qtype = {"q4_0": GGMLQuantizationType.Q4_0, "q4_1": GGMLQuantizationType.Q4_1,
             "q8_0": GGMLQuantizationType.Q8_0}[kind]
    raw = quantize((g.standard_normal((n, k)) * 0.05).astype(np.float32), qtype)
    w = torch.from_numpy(np.asarray(dequantize(raw, qtype), dtype=np.float32).reshape(n, k))
    raw = torch.from_numpy(np.ascontiguousarray(raw))
    if kind == "q8_0":
        return (lambda x: kernels.q8_0_linear(x, raw)), w
    ggml_type = kernels.Q4_0 if kind == "q4_0" else kernels.Q4_1
    return (lambda x: kernels.q4_linear(x, raw, ggml_type)), w


def _x(rows: int, k: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, k, generator=g)
    x[:, 5] *= 40  # an outlier, as activations have: the other values of its block lose low bits
    x[0, 40:64] *= 1e-3  # and a block of small values next to normal ones
    return x.to(torch.bfloat16)


def _x_with_odd_blocks(k: int) -> torch.Tensor:
    """Six rows whose blocks of 32 test how x is made codes: a block of zeros, one of tiny values (a quarter
    of them subnormal), one whose largest |x| is a power of two, all NaN, one inf among zeros, one NaN among
    normal values."""
    x = _x(6, k, seed=11)
    x[0, 0:32] = 0
    x[1, 32:64] = torch.finfo(torch.bfloat16).tiny / 8 * torch.arange(32)  # 1 / dx: past float's range
    x[2, 64:96] = torch.linspace(-0.5, 0.25, 32)
    x[2, 70] = 1.0
    x[3, 0:32] = float("nan")
    x[4, 96:128] = 0
    x[4, 100] = float("-inf")
    x[5, 40] = float("nan")
    return x


def _ulp(v: torch.Tensor) -> torch.Tensor:
    """bfloat16's step at |v| (the smallest normal's for zero)."""
    mag = v.abs().float().clamp_min(torch.finfo(torch.bfloat16).tiny)
    return torch.exp2(torch.floor(torch.log2(mag)) - 7)


@pytest.mark.parametrize("kind", ["q4_0", "q4_1", "q8_0"])
@pytest.mark.parametrize("k", [96, 576])  # 3 blocks (a half-empty last pair) and 18
def test_bf16_result_is_the_float32_one_rounded_give_or_take_quantizing_x(kind, k):
    product, w = _quantized(kind, 70, k, seed=k)
    x = _x(9, k, seed=k)  # 9 rows: tiles of 5 and 4
    got = product(x)
    assert got.dtype == torch.bfloat16 and got.shape == (9, 70)
    want32 = product(x.float())  # the float32 path: every weight made float
    want = want32.to(torch.bfloat16)
    block_amax = x.float().abs().reshape(9, -1, 32).amax(-1)  # [rows, blocks]
    block_wsum = w.abs().reshape(70, -1, 32).sum(-1)  # [n, blocks]
    moved = 2**-15 * (block_amax @ block_wsum.t())
    assert ((got.float() - want32).abs() <= moved + _ulp(want32)).all()
    assert (got == want).float().mean() >= 0.9, "nearly every result bit-equal to the float32 one rounded"


@pytest.mark.parametrize("kind", ["q4_0", "q4_1", "q8_0"])
def test_packing_keeps_every_weight(kind):
    product, w = _quantized(kind, 13, 64, seed=6)  # 13 columns: a full group of 8 and one of 5
    assert torch.equal(product(torch.eye(64)).t(), w)


@pytest.mark.parametrize("kind", ["q4_0", "q4_1", "q8_0"])
def test_a_rows_result_does_not_depend_on_its_batch(kind):
    """Every tile the kernel cuts a batch into (1 to 8 rows a pass where AVX-512 gives 32 registers, 6 with
    AVX2's madd, else up to 4; 9 and 13 rows: two or more passes) gives each row the result it gets alone. 41
    columns: the last group of 8 holds one."""
    product, _ = _quantized(kind, 41, 160, seed=3)
    x = _x(13, 160, seed=3)
    alone = torch.cat([product(x[r:r + 1]) for r in range(13)])
    for rows in [*range(2, 10), 13]:
        assert torch.equal(product(x[:rows]), alone[:rows]), f"{rows} rows"


@pytest.mark.parametrize("kind", ["q4_1", "q8_0"])
def test_two_threads_share_the_groups_and_give_the_same_result(kind):
    """Each thread takes whole groups of 8 columns; x's codes are made once, in the calling thread."""
    product, _ = _quantized(kind, 300, 576, seed=7)  # 38 groups, the last one short
    x = _x(5, 576, seed=7)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        alone = [product(x[:1]), product(x), product(x.float())]
        torch.set_num_threads(2)
        assert torch.get_num_threads() == 2
        shared = [product(x[:1]), product(x), product(x.float())]
    finally:
        torch.set_num_threads(before)
    for a, b in zip(alone, shared):
        assert torch.equal(a, b)


@pytest.mark.parametrize("kind", ["q4_1", "q8_0"])
def test_inf_or_nan_in_x_makes_its_row_nan(kind):
    product, _ = _quantized(kind, 16, 64, seed=4)
    for rows in (3, 6):
        x = _x(rows, 64, seed=4)
        x[0, 3], x[2, 50] = float("inf"), float("nan")
        got = product(x)
        assert got[0].isnan().all() and got[2].isnan().all() and not got[1].isnan().any()
        assert not got[3:].isnan().any()


def test_a_bound_weight_refuses_x_of_another_width_or_dtype():
    product, _ = _quantized("q4_1", 8, 64, seed=5)
    with pytest.raises(ValueError, match="x has 32 columns, the weight 64"):
        product(torch.ones(1, 32, dtype=torch.bfloat16))
    with pytest.raises(TypeError, match="float32 or bfloat16"):
        product(torch.ones(1, 64, dtype=torch.float16))


# x86-64-v3's instructions (AVX2, FMA, F16C, BMI, LZCNT, MOVBE) as /proc/cpuinfo names them
_V3_FLAGS = {"avx2", "fma", "f16c", "bmi1", "bmi2", "abm", "movbe"}


def _other_builds() -> dict[str, list[str]]:
    """The builds to hold against this CPU's own: the x86-64 baseline (the plain C++ loop) everywhere, and
    each AVX2 loop (8 columns a group; madd + add, or AVX-VNNI's dpwssd) this CPU can run but its own build
    does not use. So an AVX-512 machine checks the AVX2 loops too, which would otherwise wait for one."""
    builds = {"plain C++": ["-march=x86-64"]}  # named by the words its packed_loop() must say
    cpu = set(build._cpu_flags().split())
    avx512 = kernels._lib.packed_group() == 16
    if _V3_FLAGS <= cpu and (avx512 or "avx_vnni" in cpu):  # the own build is not the madd loop
        builds["AVX2 (madd + add)"] = ["-march=x86-64-v3"]
    if _V3_FLAGS <= cpu and avx512 and "avx_vnni" in cpu:
        builds["AVX2 with VNNI"] = ["-march=x86-64-v3", "-mavxvnni"]
    return builds


@pytest.mark.skipif(platform.machine() != "x86_64", reason="builds the kernels for the x86-64 baseline")
def test_the_plain_and_avx2_loops_give_this_cpus_bits(tmp_path):
    """The order of a product's additions is the definition (csrc/packed_linear.h): the two GGUF kernels built
    for the x86-64 baseline (no AVX2: the plain C++ loop, 8 columns a group), and for the AVX2 loops this CPU
    can run, give the bits this CPU's build gives (AVX2 or AVX-512, 8 or 16 columns a group, VNNI or not),
    odd blocks of x included."""
    flags = [f for f in build.FLAGS if not f.startswith("-march")]
    files = [str(build.SOURCE_DIR / name) for name in ("q4_linear.cpp", "q8_0_linear.cpp", "dequant.cpp")]
    jobs = {name: subprocess.Popen([build._compiler(), *flags, *march, *files, "-o", str(tmp_path / f"{i}.so")],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for i, (name, march) in enumerate(_other_builds().items())}  # compiled side by side
    errors = {name: job.communicate()[1] for name, job in jobs.items()}  # every compiler done before any assert
    libs = {}
    for i, (name, job) in enumerate(jobs.items()):
        assert job.returncode == 0, (name, errors[name][-2000:])
        libs[name] = ctypes.CDLL(str(tmp_path / f"{i}.so"))
    for name, lib in libs.items():
        lib.packed_loop.restype = ctypes.c_char_p
        assert name in lib.packed_loop().decode() and lib.packed_group() == 8, name
        _check_products(lib, name)
        _check_x_codes(lib, name)


def _check_products(other: ctypes.CDLL, name: str) -> None:
    from gguf.constants import GGMLQuantizationType
    from gguf.quants import quantize

    p, i = ctypes.c_void_p, ctypes.c_int64
    g = np.random.default_rng(8)
    for ggml_type, qtype in [(kernels.Q4_0, GGMLQuantizationType.Q4_0), (kernels.Q4_1, GGMLQuantizationType.Q4_1),
                             (kernels.Q8_0, GGMLQuantizationType.Q8_0)]:
        n, k = 37, 160
        w = (g.standard_normal((n, k)) * 0.05).astype(np.float32)
        raw = torch.from_numpy(np.ascontiguousarray(quantize(w, qtype)))
        ours = kernels.block_linear(raw, ggml_type)
        packed = torch.empty(((n + 7) // 8) * raw.shape[1] * 8, dtype=torch.uint8)
        if ggml_type == kernels.Q8_0:
            other.q8_0_pack(p(raw.data_ptr()), p(packed.data_ptr()), i(n), i(k))
        else:
            other.q4_pack(p(raw.data_ptr()), p(packed.data_ptr()), i(n), i(k), ctypes.c_int(ggml_type))
        rows_of_x = (1, 2, 3, 5, 8, 9, 13)  # with the odd blocks' 6: every tile of 1 to 8 rows, in every build
        for x in [_x(rows, k, seed=rows) for rows in rows_of_x] + [_x_with_odd_blocks(k)]:
            x, rows = x.contiguous(), x.shape[0]
            got = torch.empty(rows, n, dtype=torch.bfloat16)
            args = [p(x.data_ptr()), p(packed.data_ptr()), p(got.data_ptr()), i(rows), i(n), i(k)]
            if ggml_type == kernels.Q8_0:
                other.q8_0_linear_bf16(*args, ctypes.c_int(1))
            else:
                other.q4_linear_bf16(*args, ctypes.c_int(ggml_type), ctypes.c_int(1))
            assert torch.equal(got.view(torch.int16), ours(x).view(torch.int16)), (name, ggml_type, rows)
        # the blocks made whole for a GEMM (csrc/dequant.cpp): the same bfloat16 weights from either layout
        whole = torch.empty(n, k, dtype=torch.bfloat16)
        other.dequant_bf16(p(packed.data_ptr()), p(whole.data_ptr()), i(0), i(n), i(k),
                           ctypes.c_int(ggml_type), ctypes.c_int(1))
        mine = dequant_gemm.weight(ours.packed, ggml_type, n, k)
        assert torch.equal(whole.view(torch.int16), mine.view(torch.int16)), (name, ggml_type, "dequant")


def _check_x_codes(other: ctypes.CDLL, name: str) -> None:
    p, i = ctypes.c_void_p, ctypes.c_int64
    # x's codes, steps and block sums themselves, on values of many sizes (a block's float sum then depends
    # on the order of its additions), odd blocks included; 34 rows of 5 blocks: 170, not a multiple of 16 or 8
    g = torch.Generator().manual_seed(12)
    x = torch.randn(28, 160, generator=g) * torch.exp2(torch.randint(-20, 20, (28, 160), generator=g).float())
    x = torch.cat([x.to(torch.bfloat16), _x_with_odd_blocks(160)]).contiguous()
    codes = []
    for lib in (other, kernels._lib):
        q = torch.empty(x.shape, dtype=torch.int16)
        dx, sx = torch.empty(x.shape[0], 5), torch.empty(x.shape[0], 5)
        lib.quantize_x_bf16(p(x.data_ptr()), i(x.shape[0]), i(160), p(q.data_ptr()), p(dx.data_ptr()),
                            p(sx.data_ptr()))
        codes.append((q, dx.view(torch.int32), sx.view(torch.int32)))
    for a, b in zip(*codes):
        assert torch.equal(a, b), name
    # and they are what the definition says: each code x / dx to the nearest integer (dx a power of two),
    # each sum the block's float32 sum in order, zero codes where a block is all zeros or holds an inf or NaN
    q, dx, sx = codes[1][0].double(), codes[1][1].view(torch.float32), codes[1][2].view(torch.float32)
    blocks = x.double().view(x.shape[0], 5, 32)
    step = dx.double().unsqueeze(-1)
    ok = (dx > 0) & dx.isfinite()
    want = torch.where(ok.unsqueeze(-1), (blocks / step).round().clamp(-32767, 32767), 0.0)
    assert torch.equal(q.view(x.shape[0], 5, 32), want)
    assert dx[28, 0] == 0 and dx[31, 0].isnan() and dx[32, 3].isnan() and ok[29, 1]  # zeros, NaN, inf, tiny
    in_order = torch.zeros(x.shape[0], 5)
    for j in range(32):
        in_order = in_order + blocks[..., j].float()
    assert torch.equal(sx.nan_to_num(7.0), in_order.nan_to_num(7.0))
