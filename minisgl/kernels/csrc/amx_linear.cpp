// GGUF blocks multiplied on AMX's bfloat16 tiles, each block made whole in the tile's own layout first:
//
//   amx_linear_bf16   out[r, j] = bf16(sum_k x[r, k] * w[j, k])     x, out bfloat16; w from packed blocks
//
// dequant.cpp makes a layer's weights whole in memory (a few MiB) for oneDNN's GEMM to read back. Here each
// block of a group of 16 output columns becomes one 1 KiB B tile in L1 instead, in the pair layout
// TDPBF16PS reads (row i: each column's weights 2i and 2i + 1), which is how packed_blocks.h already lays
// out the codes; the tile then serves every 16 rows of x (eight groups at a time). The weights are the
// ones `--quantization none` multiplies with (gguf's float32 value rounded to the nearest bfloat16, ties to
// even); the sums are float32 in the tiles' order, so a product equals F.linear's on the same weights to
// bfloat16 rounding, not bit for bit, and a row's result does not depend on the other rows of its batch.
//
// Linux lends a process the tiles' 8 KiB of state only when asked (arch_prctl); amx_ready() asks once.

#include <vector>

#include "packed_linear.h"

#if MINISGL_PACKED_AVX512 && defined(__AMX_TILE__) && defined(__AMX_BF16__) && defined(__AVX512BF16__) && \
    defined(__linux__)
#define MINISGL_AMX 1
#include <omp.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

using namespace minisgl;

#if MINISGL_AMX
namespace {

constexpr int TILE = 16;  // rows of x, and columns of W, per tile
static_assert(GROUP == TILE, "a packed group of columns is one tile's");
// groups made whole at a time (k / 32 KiB of tiles each: 8 x 48 KiB for SmolLM2's widest, in L2): each 64
// rows of x, once loaded, serve all of them, so x is read once per CHUNK groups however many rows it has
constexpr int64_t CHUNK = 8;

struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// GCC 12's _tile_loadconfig declares a read of 8 bytes and lets the other 56 go unwritten: name all 64
inline void load_config(const TileConfig& cfg) { asm volatile("ldtilecfg %0" ::"m"(cfg)); }

// tiles 0-3: sums of up to 4 x 16 rows; 4: one block of W (16 pairs x 16 columns); 5, 6: x's rows
const TileConfig& config() {
  static const TileConfig cfg = [] {
    TileConfig c;
    for (int t = 0; t < 7; ++t) {
      c.rows[t] = TILE;
      c.colsb[t] = 64;
    }
    return c;
  }();
  return cfg;
}

// each column's d (and m) twice, for the lanes of its pair: columns 0-7 in `lo`, 8-15 in `hi`
inline void pair_lanes(const uint8_t* half16, __m512& lo, __m512& hi) {
  const __m512 v = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(half16)));
  lo = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7), v);
  const __m512i upper = _mm512_setr_epi32(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15);
  hi = _mm512_permutexvar_ps(upper, v);
}

// one block of a Q4 group as a B tile: row i = 4u + s is nibble s of the codes' row u
template <class Pack>
inline void q4_tile(const uint8_t* blk, uint16_t* tile) {
  __m512 dlo, dhi, mlo, mhi;
  pair_lanes(blk, dlo, dhi);
  if (Pack::HEAD == 4 * GROUP) {
    pair_lanes(blk + 2 * GROUP, mlo, mhi);
  } else {  // Q4_0: (q - 8) d
    mlo = _mm512_mul_ps(dlo, _mm512_set1_ps(-8.f));
    mhi = _mm512_mul_ps(dhi, _mm512_set1_ps(-8.f));
  }
  for (int u = 0; u < 4; ++u) {
    const __m512i row = _mm512_loadu_si512(blk + Pack::HEAD + 64 * u);
    for (int s = 0; s < 4; ++s) {
      const __m512i codes = _mm512_and_si512(_mm512_srli_epi16(row, 4 * s), _mm512_set1_epi16(15));
      const __m512 lo = _mm512_cvtepi32_ps(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(codes)));
      const __m512 hi = _mm512_cvtepi32_ps(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(codes, 1)));
      const __m512bh w = _mm512_cvtne2ps_pbh(_mm512_fmadd_ps(hi, dhi, mhi), _mm512_fmadd_ps(lo, dlo, mlo));
      _mm512_store_si512(tile + 32 * (4 * u + s), reinterpret_cast<const __m512i&>(w));
    }
  }
}

// one block of a Q8_0 group: row i is the 32 int8 codes of pair i, times each column's d
inline void q8_tile(const uint8_t* blk, uint16_t* tile) {
  __m512 dlo, dhi;
  pair_lanes(blk, dlo, dhi);
  for (int i = 0; i < 16; ++i) {
    const __m256i codes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + Q8Pack::HEAD + 32 * i));
    const __m512 lo = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_castsi256_si128(codes)));
    const __m512 hi = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_extracti128_si256(codes, 1)));
    const __m512bh w = _mm512_cvtne2ps_pbh(_mm512_mul_ps(hi, dhi), _mm512_mul_ps(lo, dlo));
    _mm512_store_si512(tile + 32 * i, reinterpret_cast<const __m512i&>(w));
  }
}

// sums (16 rows x 16 float32) to bfloat16 rows of out: the first `valid` rows, the columns in `cols`
inline void store_rows(const float* sums, uint16_t* out, int64_t n, int valid, __mmask16 cols) {
  for (int r = 0; r < valid; ++r) {
    const __m256bh b = _mm512_cvtneps_pbh(_mm512_load_ps(sums + TILE * r));
    _mm256_mask_storeu_epi16(out + r * n, cols, reinterpret_cast<const __m256i&>(b));
  }
}

template <class Pack>
void amx_linear(const uint16_t* x, const uint8_t* packed, uint16_t* out, int64_t rows, int64_t n, int64_t k,
                int threads) {
  const int64_t blocks = k / BLOCK, groups = (n + GROUP - 1) / GROUP, stride = 2 * k;
  const int64_t padded = (rows + TILE - 1) / TILE * TILE;
  thread_local std::vector<uint16_t> xpad;  // x with its rows made a multiple of 16 (zeros)
  const uint16_t* xs = x;
  if (padded != rows) {
    xpad.assign(padded * k, 0);
    std::memcpy(xpad.data(), x, rows * k * 2);
    xs = xpad.data();
  }
  const int workers = threads > 1 && groups * rows * k >= (1 << 20) ? threads : 1;
  auto work = [&](int64_t g0, int64_t g1) {
    thread_local std::vector<__m512i> tiles_of_w;  // CHUNK groups' blocks as B tiles, 64-byte aligned
    if (static_cast<int64_t>(tiles_of_w.size()) < CHUNK * blocks * 16) tiles_of_w.resize(CHUNK * blocks * 16);
    alignas(64) float sums[TILE * TILE];
    load_config(config());
    // up to 64 rows (a decode batch), group g + 1 is made whole block by block between group g's products,
    // so the vector units and the tiles work at once; with more rows, the chunk's groups first
    const bool interleave = padded <= 4 * TILE;
    for (int64_t c0 = g0; c0 < g1; c0 += CHUNK) {
      const int64_t c1 = std::min(g1, c0 + CHUNK);
      auto make = [&](int64_t g, int64_t b) {
        const uint8_t* blk = packed + (g * blocks + b) * Pack::BYTES;
        uint16_t* wt = reinterpret_cast<uint16_t*>(tiles_of_w.data()) + ((g - c0) * blocks + b) * 512;
        if constexpr (Pack::OFFSETS)
          q4_tile<Pack>(blk, wt);
        else
          q8_tile(blk, wt);
      };
      for (int64_t g = c0; g < (interleave ? c0 + 1 : c1); ++g)
        for (int64_t b = 0; b < blocks; ++b) make(g, b);
      const int64_t width = c1 - c0, steps = (padded + 4 * TILE - 1) / (4 * TILE) * width;
      for (int64_t step = 0; step < steps; ++step) {  // each 64 rows of x, against each group of the chunk
        const int64_t r0 = step / width * 4 * TILE, g = c0 + step % width;
        const uint16_t* wt = reinterpret_cast<const uint16_t*>(tiles_of_w.data()) + (g - c0) * blocks * 512;
        const int tiles = static_cast<int>(std::min<int64_t>(4, (padded - r0) / TILE));
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
        const uint16_t* xr = xs + r0 * k;
        const bool next = interleave && g + 1 < c1;
        for (int64_t b = 0; b < blocks; ++b) {
          _tile_loadd(4, wt + 512 * b, 64);
          _tile_loadd(5, xr + b * BLOCK, stride);
          _tile_dpbf16ps(0, 5, 4);
          if (tiles > 1) {
            _tile_loadd(6, xr + TILE * k + b * BLOCK, stride);
            _tile_dpbf16ps(1, 6, 4);
          }
          if (tiles > 2) {
            _tile_loadd(5, xr + 2 * TILE * k + b * BLOCK, stride);
            _tile_dpbf16ps(2, 5, 4);
          }
          if (tiles > 3) {
            _tile_loadd(6, xr + 3 * TILE * k + b * BLOCK, stride);
            _tile_dpbf16ps(3, 6, 4);
          }
          if (next) make(g + 1, b);
        }
        uint16_t* o = out + r0 * n + g * GROUP;
        const __mmask16 cols = static_cast<__mmask16>((1u << std::min<int64_t>(GROUP, n - g * GROUP)) - 1);
        auto valid = [&](int t) { return static_cast<int>(std::min<int64_t>(TILE, rows - r0 - TILE * t)); };
        _tile_stored(0, sums, 64);
        store_rows(sums, o, n, valid(0), cols);
        if (tiles > 1 && valid(1) > 0) {
          _tile_stored(1, sums, 64);
          store_rows(sums, o + TILE * n, n, valid(1), cols);
        }
        if (tiles > 2 && valid(2) > 0) {
          _tile_stored(2, sums, 64);
          store_rows(sums, o + 2 * TILE * n, n, valid(2), cols);
        }
        if (tiles > 3 && valid(3) > 0) {
          _tile_stored(3, sums, 64);
          store_rows(sums, o + 3 * TILE * n, n, valid(3), cols);
        }
      }
    }
    _tile_release();
  };
  if (workers == 1) {
    work(0, groups);
    return;
  }
#pragma omp parallel num_threads(workers)
  {
    const int64_t t = omp_get_thread_num(), each = (groups + workers - 1) / workers;
    work(std::min(groups, t * each), std::min(groups, (t + 1) * each));
  }
}

}  // namespace
#endif

// 1 where this CPU has the tiles and the kernel asked Linux for their state, else 0 (then never call
// amx_linear_bf16)
extern "C" int amx_ready() {
#if MINISGL_AMX
  static const int ready = syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */) == 0;
  return ready;
#else
  return 0;
#endif
}

// out [rows, n] = x [rows, k] @ W.T, every pointer contiguous; ggml_type 2 (Q4_0), 3 (Q4_1) or 8 (Q8_0)
extern "C" void amx_linear_bf16(const uint16_t* x, const uint8_t* packed, uint16_t* out, int64_t rows,
                                int64_t n, int64_t k, int ggml_type, int threads) {
#if MINISGL_AMX
  if (ggml_type == 8)
    amx_linear<Q8Pack>(x, packed, out, rows, n, k, threads);
  else if (ggml_type == 3)
    amx_linear<Q4Pack<20>>(x, packed, out, rows, n, k, threads);
  else
    amx_linear<Q4Pack<18>>(x, packed, out, rows, n, k, threads);
#else
  (void)x, (void)packed, (void)out, (void)rows, (void)n, (void)k, (void)ggml_type, (void)threads;
#endif
}
