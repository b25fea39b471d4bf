"""The engine's CPU kernels (csrc/*.cpp, one file per concern), called with torch tensors.

On a CPU a batch-1 decode step runs hundreds of tiny torch ops (an RMSNorm alone is seven of them), and a
batch-64 decode spent over a third of its time copying each request's K and V out of the paged pool into
a padded batch and attending over it. These kernels do each of those jobs in one pass: RMSNorm (with the
residual add fused in), rotary embedding in place, SiLU-and-mul, decode attention that reads the KV slots
where they are, linear layers over the GGUF file's own Q4_0, Q4_1 and Q8_0 blocks (never dequantized:
repacked once into groups of 8 or 16 columns, the same bytes; bfloat16 x is multiplied in integers), and
greedy sampling (argmax and its log-probability in one pass over the logits). Three more take the last
torch ops out of a decode step (writing K/V into the pool, Q8_0 embedding rows, the logits made float32),
so that kernels/graph.py can record a whole step's kernel calls and replay them in one C call
(csrc/graph.cpp; model_executor/cpu_graph_runner.py).

`load()` builds the library on first use (see build.py); `available()` says whether that worked and
`unavailable_reason()` why not. Kernels take contiguous float32 or bfloat16 CPU tensors (`supports`);
the layers fall back to their torch code for anything else.
"""

from __future__ import annotations

import ctypes
import logging
import threading

import torch
import torch.nn.functional as F

from minisgl.kernels.build import KernelBuildError, load_library

logger = logging.getLogger(__name__)

_SUFFIX = {torch.float32: "f32", torch.bfloat16: "bf16"}
_lib: ctypes.CDLL | None = None
_error: str | None = None
_fns: dict[tuple[str, torch.dtype], ctypes._CFuncPtr] = {}  # (kernel, dtype) -> its C function
_LANES = (8, 16, 4, 32, 1)  # the float vector widths torch's CPU builds use (AVX2, AVX-512, Arm, ...)
_lanes = 8  # this torch's, found by load()
_group = 8  # output columns per packed group of the GGUF kernels on this CPU (8, or 16 with AVX-512)

_P, _I, _F, _N = ctypes.c_void_p, ctypes.c_int64, ctypes.c_float, ctypes.c_int
_SIGNATURES = {
    "rms_norm": [_P, _P, _P, _I, _I, _F, _N, _N],
    "fused_add_rms_norm": [_P, _P, _P, _I, _I, _F, _N, _N],
    "rotary_embedding": [_P, _P, _P, _P, _P, _I, _I, _I, _I, _I, _I, _N],
    "silu_and_mul": [_P, _P, _I, _I, _N],
    "decode_attention": [_P, _P, _P, _P, _P, _P, _P, _I, _I, _I, _I, _I, _I, _F, _N],
    "q8_0_linear": [_P, _P, _P, _I, _I, _I, _N],
    "q4_linear": [_P, _P, _P, _I, _I, _I, _N, _N],
    "kv_write": [_P, _P, _P, _I, _I, _I],
    "q8_0_embedding": [_P, _P, _P, _I, _I],
}
# thread id -> the Recorder of the forward that thread is capturing (kernels/graph.py); empty otherwise
_recorders: dict = {}


def load() -> bool:
    """Build (once per machine) and load the library; False, with the reason kept, where that fails."""
    global _lib, _error, _lanes, _group
    if _lib is None and _error is None:
        try:
            lib = load_library()
            for name, argtypes in _SIGNATURES.items():
                for dtype, suffix in _SUFFIX.items():
                    fn = getattr(lib, f"{name}_{suffix}")
                    fn.argtypes, fn.restype = argtypes, None
                    _fns[name, dtype] = fn
            lib.greedy_sample_f32.argtypes, lib.greedy_sample_f32.restype = [_P, _P, _P, _I, _I, _N], None
            _fns["greedy_sample", torch.float32] = lib.greedy_sample_f32  # logits are float32 only
            lib.bf16_to_f32.argtypes, lib.bf16_to_f32.restype = [_P, _P, _I], None
            lib.q4_pack.argtypes, lib.q4_pack.restype = [_P, _P, _I, _I, _N], None
            lib.q8_0_pack.argtypes, lib.q8_0_pack.restype = [_P, _P, _I, _I], None
            lib.packed_group.argtypes, lib.packed_group.restype = [], ctypes.c_int
            lib.packed_loop.argtypes, lib.packed_loop.restype = [], ctypes.c_char_p
            lib.dequant_bf16.argtypes, lib.dequant_bf16.restype = [_P, _P, _I, _I, _I, _N, _N], None
            _group = lib.packed_group()
            _fns["bf16_to_f32", torch.bfloat16] = lib.bf16_to_f32
            _lib = lib
            found = sum_lanes()  # after _lib is set: it runs the kernel
            if found is None:
                logger.info("torch sums in an order unknown to the RMSNorm kernel: it may differ by an ulp")
            _lanes = found or 8
        except (KernelBuildError, AttributeError) as e:
            _error = str(e)
            logger.warning("CPU kernels unavailable, using torch ops: %s", _error)
    return _lib is not None


def available() -> bool:
    return _lib is not None


def unavailable_reason() -> str | None:
    return _error


def packed_loop() -> str:
    """Which vector loop the GGUF products run on this CPU, in words (benchmarks print it)."""
    return _lib.packed_loop().decode() if load() else f"none: the CPU kernels are unavailable ({_error})"


def supports(dtype: torch.dtype, device: torch.device | str) -> bool:
    return torch.device(device).type == "cpu" and dtype in _SUFFIX


def _fn(name: str, dtype: torch.dtype):
    return _fns[name, dtype]


def _run(name: str, dtype: torch.dtype, *args, keep: tuple[torch.Tensor, ...] = ()) -> None:
    """Call one kernel; while a decode step is being recorded (kernels/graph.py), also note the call and keep
    the tensors whose memory its pointers name (`keep`) alive for the graph's replays."""
    _fns[name, dtype](*args)
    if _recorders:
        recorder = _recorders.get(threading.get_ident())
        if recorder is not None:
            recorder.add(name, dtype, args, keep)


def _rows(x: torch.Tensor) -> int:
    return x.numel() // x.shape[-1]


def sum_lanes(candidates: tuple[int, ...] = _LANES) -> int | None:
    """The vector width torch's CPU sum adds with, which sets its order and so its rounding (8 with AVX2,
    16 with AVX-512, 4 or 8 on Arm, as built): the first width at which the kernel's RMSNorm equals
    F.rms_norm on rows spread over a wide range of magnitudes, where other orders round differently."""
    g = torch.Generator().manual_seed(0)
    magnitudes = torch.exp2(torch.randint(-12, 12, (16, 1000), generator=g).float())
    x = torch.randn(16, 1000, generator=g) * magnitudes
    want, ones = F.rms_norm(x, (1000,), eps=1e-6), torch.ones(1000)
    return next((n for n in candidates if torch.equal(rms_norm(x, ones, 1e-6, lanes=n), want)), None)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float, lanes: int | None = None) -> torch.Tensor:
    x = x.contiguous()
    out = torch.empty_like(x)
    _run("rms_norm", x.dtype, x.data_ptr(), weight.data_ptr(), out.data_ptr(), _rows(x), x.shape[-1], eps,
         lanes or _lanes, torch.get_num_threads(), keep=(x, weight, out))
    return out


def fused_add_rms_norm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float) -> None:
    """In place: residual += x, then x = rms_norm(residual). Both must be contiguous."""
    assert x.is_contiguous() and residual.is_contiguous() and x.shape == residual.shape
    _run("fused_add_rms_norm", x.dtype, x.data_ptr(), residual.data_ptr(), weight.data_ptr(), _rows(x),
         x.shape[-1], eps, _lanes, torch.get_num_threads(), keep=(x, residual, weight))


def rotary_embedding(positions: torch.Tensor, q: torch.Tensor, k: torch.Tensor, cos_cache: torch.Tensor,
                     sin_cache: torch.Tensor) -> None:
    """In place. q: [T, heads, D], k: [T, kv_heads, D], each head contiguous (rows may be strided, as the
    views of one fused qkv output are); cos/sin caches: float32 [max_position, D]."""
    head_dim = q.shape[-1]
    assert q.stride(-1) == 1 and q.stride(-2) == head_dim and k.stride(-1) == 1 and k.stride(-2) == head_dim
    assert positions.dtype == torch.int64 and positions.is_contiguous() and cos_cache.dtype == torch.float32
    _run("rotary_embedding", q.dtype, positions.data_ptr(), q.data_ptr(), k.data_ptr(), cos_cache.data_ptr(),
         sin_cache.data_ptr(), q.shape[0], q.shape[1], k.shape[1], head_dim, q.stride(0), k.stride(0),
         torch.get_num_threads(), keep=(positions, q, k, cos_cache, sin_cache))


def silu_and_mul(gate_up: torch.Tensor) -> torch.Tensor:
    gate_up = gate_up.contiguous()
    inter = gate_up.shape[-1] // 2
    out = torch.empty((*gate_up.shape[:-1], inter), dtype=gate_up.dtype)
    _run("silu_and_mul", gate_up.dtype, gate_up.data_ptr(), out.data_ptr(), _rows(gate_up), inter,
         torch.get_num_threads(), keep=(gate_up, out))
    return out


def decode_attention(q: torch.Tensor, k_buffer: torch.Tensor, v_buffer: torch.Tensor,
                     req_to_token: torch.Tensor, req_pool_indices: torch.Tensor, seq_lens: torch.Tensor,
                     scale: float) -> torch.Tensor:
    """q: [B, heads, D] (one row per request); k/v_buffer: one layer's pool, [slots, kv_heads, D].
    Request b attends to the slots req_to_token[req_pool_indices[b], :seq_lens[b]]. Returns [B, heads, D]."""
    batch, heads, head_dim = q.shape
    assert (q.stride(-1) == 1 and q.stride(-2) == head_dim and k_buffer.is_contiguous()
            and v_buffer.is_contiguous())
    assert req_to_token.dtype == req_pool_indices.dtype == seq_lens.dtype == torch.int64
    assert req_to_token.is_contiguous() and req_pool_indices.is_contiguous() and seq_lens.is_contiguous()
    out = torch.empty((batch, heads, head_dim), dtype=q.dtype)
    _run("decode_attention", q.dtype, q.data_ptr(), k_buffer.data_ptr(), v_buffer.data_ptr(), out.data_ptr(),
         req_to_token.data_ptr(), req_pool_indices.data_ptr(), seq_lens.data_ptr(), batch, heads,
         k_buffer.shape[1], head_dim, q.stride(0), req_to_token.shape[1], scale, torch.get_num_threads(),
         keep=(q, k_buffer, v_buffer, out, req_to_token, req_pool_indices, seq_lens))
    return out


def greedy_sample(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """logits: float32 [B, vocab] -> (argmax int64 [B], its log-probability float32 [B])."""
    logits = logits.contiguous()
    assert logits.dtype == torch.float32 and logits.dim() == 2
    ids = torch.empty(logits.shape[0], dtype=torch.int64)
    logprobs = torch.empty(logits.shape[0], dtype=torch.float32)
    _fn("greedy_sample", logits.dtype)(logits.data_ptr(), ids.data_ptr(), logprobs.data_ptr(),
                                       logits.shape[0], logits.shape[1], torch.get_num_threads())
    return ids, logprobs


Q4_0, Q4_1, Q8_0 = 2, 3, 8  # ggml types
BLOCK_BYTES = {Q4_0: 18, Q4_1: 20, Q8_0: 34}  # per 32 weights, in the file and packed alike


def pack_blocks(raw: torch.Tensor, ggml_type: int) -> torch.Tensor:
    """The file's rows of blocks (uint8 [N, K / 32 * bytes], row j column j of W) repacked for the kernels:
    groups of G columns side by side (G = 8, or 16 on a CPU with AVX-512), per block their scales then their
    codes pair by pair (csrc/packed_blocks.h). The same bytes per weight; a last group short of G columns is
    padded with zeros. Returns uint8 [ceil(N / G), K / 32 * G * bytes]."""
    if not load():
        raise RuntimeError(f"the CPU kernels are unavailable: {_error}")
    assert ggml_type in BLOCK_BYTES and raw.dtype == torch.uint8 and raw.dim() == 2
    raw = raw.contiguous()
    assert raw.shape[1] % BLOCK_BYTES[ggml_type] == 0
    n, k = raw.shape[0], raw.shape[1] // BLOCK_BYTES[ggml_type] * 32
    packed = torch.empty(((n + _group - 1) // _group, raw.shape[1] * _group), dtype=torch.uint8)
    if ggml_type == Q8_0:
        _lib.q8_0_pack(raw.data_ptr(), packed.data_ptr(), n, k)
    else:
        _lib.q4_pack(raw.data_ptr(), packed.data_ptr(), n, k, ggml_type)
    return packed


def q8_0_linear(x: torch.Tensor, raw: torch.Tensor) -> torch.Tensor:
    """x [..., K] @ W.T with W as the GGUF file stores it in Q8_0: raw uint8 [N, K / 32 * 34], row j column j
    of W, each block of 32 weights an fp16 scale and 32 int8 codes. Returns [..., N] in x's dtype.
    (Packs W on every call: a layer packs once, with block_linear.)"""
    return block_linear(raw, Q8_0)(x)


def q4_linear(x: torch.Tensor, raw: torch.Tensor, ggml_type: int) -> torch.Tensor:
    """x [..., K] @ W.T with W as the GGUF file stores it in Q4_0 or Q4_1 (`ggml_type`): raw uint8
    [N, K / 32 * 18 or 20], each block of 32 weights an fp16 scale d (Q4_1: and an fp16 offset m), then 16
    bytes of 4-bit codes q; weight = q * d + m (Q4_0: m = -8 d). Returns [..., N] in x's dtype."""
    return block_linear(raw, ggml_type)(x)


def block_linear(raw: torch.Tensor, ggml_type: int):
    """q4_linear or q8_0_linear with the weight packed and bound once: a layer keeps the returned function
    (its `packed` attribute holds the packed weight; the raw rows are not kept) and calls it with x alone (a
    decode step makes about 150 of these calls, where each check costs microseconds)."""
    if not load():
        raise RuntimeError(f"the CPU kernels are unavailable: {_error}")
    from minisgl.kernels.dequant_gemm import multiply

    n, k = raw.shape[0], raw.shape[1] // BLOCK_BYTES[ggml_type] * 32
    packed = pack_blocks(raw, ggml_type)
    name = "q8_0_linear" if ggml_type == Q8_0 else "q4_linear"
    extra = () if ggml_type == Q8_0 else (ggml_type,)

    def product(x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != k:
            raise ValueError(f"{name}: x has {x.shape[-1]} columns, the weight {k}")
        if x.dtype not in _SUFFIX:
            raise TypeError(f"{name}: x must be float32 or bfloat16, not {x.dtype}")
        x = x.contiguous()
        rows = x.numel() // k
        if product.gemm_rows is not None and rows >= product.gemm_rows and x.dtype == torch.bfloat16:
            return multiply(x, product)
        out = torch.empty((*x.shape[:-1], n), dtype=x.dtype)
        _run(name, x.dtype, x.data_ptr(), packed.data_ptr(), out.data_ptr(), rows, n, k, *extra,
             torch.get_num_threads(), keep=(x, packed, out))
        return out

    product.packed = packed
    product.shape = (ggml_type, n, k)
    product.gemm_rows = None  # bfloat16 x of this many rows or more: dequantized for a GEMM (dequant_gemm.py)
    product.onednn_rows = None  # ... and of this many or more, for oneDNN's rather than on AMX tiles
    return product


# ---- the parts of a decode step that were torch ops between kernels (csrc/graph.cpp) ------------------
def kv_write(pool: torch.Tensor, loc: torch.Tensor, rows: torch.Tensor) -> None:
    """pool[loc[i]] = rows[i], as pool.index_copy_(0, loc, rows). pool: one layer's [slots, kv_heads, D];
    rows: [T, kv_heads, D] of the pool's dtype, each row contiguous (rows may be strided); loc: int64."""
    width, loc = pool[0].numel(), loc.contiguous()
    if rows.stride(-1) != 1 or (rows.dim() > 2 and rows.stride(-2) != rows.shape[-1]):
        rows = rows.contiguous()
    assert pool.is_contiguous() and rows.dtype == pool.dtype and loc.dtype == torch.int64
    assert rows.shape[0] == loc.numel() and rows[0].numel() == width
    _run("kv_write", pool.dtype, rows.data_ptr(), pool.data_ptr(), loc.data_ptr(), rows.shape[0], width,
         rows.stride(0), keep=(rows, pool, loc))


def q8_0_embedding(ids: torch.Tensor, packed: torch.Tensor, dim: int, dtype: torch.dtype) -> torch.Tensor:
    """Rows `ids` of a Q8_0 table packed by pack_blocks (row i is column i of W), each value d * q, in
    `dtype`: the rows the dequantized table holds, bit for bit."""
    ids = ids.contiguous()
    assert ids.dtype == torch.int64 and packed.dtype == torch.uint8 and packed.is_contiguous()
    out = torch.empty((*ids.shape, dim), dtype=dtype)
    _run("q8_0_embedding", dtype, ids.data_ptr(), packed.data_ptr(), out.data_ptr(), ids.numel(), dim,
         keep=(ids, packed, out))
    return out


def bf16_to_f32(x: torch.Tensor) -> torch.Tensor:
    """x.float() for a bfloat16 tensor (exact)."""
    x = x.contiguous()
    assert x.dtype == torch.bfloat16
    out = torch.empty(x.shape, dtype=torch.float32)
    _run("bf16_to_f32", torch.bfloat16, x.data_ptr(), out.data_ptr(), x.numel(), keep=(x, out))
    return out
