// The bfloat16 path of the kernels that multiply GGUF's quantized blocks as stored (q4_linear.cpp,
// q8_0_linear.cpp): the products in integers, as llama.cpp does, but with x kept to 16 bits, not 8.
//
// Each block of 32 values of a row of x becomes int16 codes with one step dx, a power of two:
// x ~ xq * dx, with |xq| <= 32767. A bfloat16 value has 8 significant bits, so every value of the block
// within a factor 128 of the block's largest is exact; the smaller ones are off by at most 2^-16 of the
// largest (bfloat16 itself rounds each value to 2^-9 of its own size). Then, per block of a weight column,
// AVX2's madd (VNNI's dpwssd where the CPU has it) multiplies 16 pairs of int16 and adds them in pairs, in
// exact integer arithmetic, and one float multiply-add brings the block's integer sum in:
// acc += float(sum q * xq) * (d * dx). A weight block's codes q are never made float: with the weight in
// cache, a 960 x 576 product of one row took 42 us here against 72 us for decoding each weight to a float
// and multiplying in float (block_linear.h, the float32 path).
//
// Layout: weights go by pairs of blocks (64 weights), as four vectors of 16 int16 each; each Column says
// which of the pair's 64 values of x each int16 lane multiplies (`source`), and which block each of the
// 8 int32 lanes of the pair's sums belongs to (`lane_block`). x is quantized once per call into that order.
// A Q4 block's offset m (Q4_0's is -8 d) adds m * (sum of the block's x), with x's own float sum.
//
// Each row's sums are added in the same order whatever the number of rows multiplied with it, so a row's
// result does not depend on the batch it came in.

#pragma once

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define MINISGL_INT16_LINEAR 1
#include <immintrin.h>

#include <vector>

#include "block_linear.h"

namespace minisgl {

// VNNI's multiply-and-add of int16 pairs into int32 lanes: madd and add in one instruction
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
#define DPWSSD _mm256_dpwssd_epi32
#elif defined(__AVXVNNI__)
#define DPWSSD _mm256_dpwssd_avx_epi32
#endif

// A pair's four int16 weight vectors times x's, in int32 lanes: `first` sums vectors 0 and 1, `second`
// vectors 2 and 3 (each lane four products; madd multiplies neighbouring int16 and adds them, dpwssd adds
// to what it is given as well). Each Column combines the two its own way.
inline void pair_products(const __m256i* w, const int16_t* xq, __m256i* first, __m256i* second) {
  const __m256i* xv = reinterpret_cast<const __m256i*>(xq);
#if defined(DPWSSD)
  const __m256i zero = _mm256_setzero_si256();
  *first = DPWSSD(DPWSSD(zero, w[0], _mm256_loadu_si256(xv)), w[1], _mm256_loadu_si256(xv + 1));
  *second = DPWSSD(DPWSSD(zero, w[2], _mm256_loadu_si256(xv + 2)), w[3], _mm256_loadu_si256(xv + 3));
#else
  *first = _mm256_add_epi32(_mm256_madd_epi16(w[0], _mm256_loadu_si256(xv)),
                            _mm256_madd_epi16(w[1], _mm256_loadu_si256(xv + 1)));
  *second = _mm256_add_epi32(_mm256_madd_epi16(w[2], _mm256_loadu_si256(xv + 2)),
                             _mm256_madd_epi16(w[3], _mm256_loadu_si256(xv + 3)));
#endif
}

constexpr int I16_ROWS = 4;  // rows of x per pass over a weight column: 2 accumulators each, 16 registers

// x's rows in the Column's order: per row and pair of blocks, 64 int16 codes, and per int32 lane the
// step dx of that lane's block and a quarter of the block's float sum of x (four lanes hold each block:
// a Q4 block's offset m adds m * sum, lane by lane).
struct RowsI16 {
  const int16_t* q;
  const float* dx;
  const float* sx;
  int64_t pairs, blocks;
};

template <class Column, typename T>
RowsI16 quantize_rows(const T* x, int64_t rows, int64_t k) {
  static thread_local std::vector<int16_t> qbuf;
  static thread_local std::vector<float> dxbuf, sxbuf;
  const int64_t blocks = k / BLOCK, pairs = (blocks + 1) / 2;
  qbuf.assign(rows * pairs * 64, 0);
  dxbuf.assign(rows * pairs * 8, 0.f);
  sxbuf.assign(rows * pairs * 8, 0.f);
  int where[64];  // for each int16 position of a pair, the index (0..63) of the x value it holds
  for (int s = 0; s < 4; ++s)
    for (int l = 0; l < 16; ++l) where[s * 16 + l] = Column::source(s, l);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t p = 0; p < pairs; ++p) {
      int16_t codes[64] = {};
      float dx[2] = {0.f, 0.f}, sx[2] = {0.f, 0.f};
      for (int h = 0; h < 2 && 2 * p + h < blocks; ++h) {
        const T* xb = x + r * k + (2 * p + h) * BLOCK;
        float amax = 0.f, sum = 0.f;
        for (int i = 0; i < BLOCK; ++i) {
          const float v = to_float(xb[i]);
          amax = std::fmax(amax, std::fabs(v));
          sum += v;
        }
        sx[h] = sum * 0.25f;  // exact
        if (std::isinf(amax) || std::isnan(sum)) {  // an inf or NaN in x (fmax skips NaN; the sum keeps it)
          dx[h] = NAN;  // makes every sum of the row NaN, as the float product would
          continue;
        }
        if (amax == 0.f) continue;  // codes stay 0
        int e;
        std::frexp(amax, &e);  // amax < 2^e
        dx[h] = std::ldexp(1.f, e - 15);
        const float inv = std::ldexp(1.f, 15 - e);
        for (int i = 0; i < BLOCK; ++i) {
          const float q = std::nearbyint(to_float(xb[i]) * inv);
          codes[h * BLOCK + i] = static_cast<int16_t>(q > 32767.f ? 32767.f : (q < -32767.f ? -32767.f : q));
        }
      }
      int16_t* out = qbuf.data() + (r * pairs + p) * 64;
      for (int i = 0; i < 64; ++i) out[i] = codes[where[i]];
      for (int lane = 0; lane < 8; ++lane) {
        dxbuf[(r * pairs + p) * 8 + lane] = dx[Column::lane_block(lane)];
        sxbuf[(r * pairs + p) * 8 + lane] = sx[Column::lane_block(lane)];
      }
    }
  return {qbuf.data(), dxbuf.data(), sxbuf.data(), pairs, blocks};
}

// Rows [r0, r0 + TILE) times one weight column; per row one accumulator for the products and, for a
// Column with offsets (Q4), one for m * sum.
template <int TILE, class Column>
inline void dot_tile_i16(const RowsI16& x, int64_t r0, const Column& col, float* sums) {
  __m256 acc[TILE], off[TILE];
  for (int t = 0; t < TILE; ++t) acc[t] = off[t] = _mm256_setzero_ps();
  for (int64_t p = 0; p < x.pairs; ++p) {
    __m256i w[4];
    __m256 d, m;
    col.decode(p, x.blocks, w, &d, &m);
    for (int t = 0; t < TILE; ++t) {
      const int64_t at = (r0 + t) * x.pairs + p;
      const __m256i s = Column::dot(w, x.q + at * 64);
      const __m256 scale = _mm256_mul_ps(d, _mm256_loadu_ps(x.dx + at * 8));
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), scale, acc[t]);
      if constexpr (Column::OFFSETS) off[t] = _mm256_fmadd_ps(m, _mm256_loadu_ps(x.sx + at * 8), off[t]);
    }
  }
  for (int t = 0; t < TILE; ++t) sums[t] = hsum(reinterpret_cast<V8>(_mm256_add_ps(acc[t], off[t])));
}

template <typename T, class MakeColumn>
void int16_linear(const T* x, T* out, int64_t rows, int64_t n, int64_t k, int threads, MakeColumn column) {
  using Column = decltype(column(0));
  const RowsI16 xq = quantize_rows<Column>(x, rows, k);
  // the start of the weight, which no block of the loop asks for ahead of time
  const char* start = reinterpret_cast<const char*>(column(0).row);
  for (int off = 0; off < PREFETCH; off += 64) _mm_prefetch(start + off, _MM_HINT_T0);
  parallel_for(n, threads, n * k * rows >= 65536, [&](int64_t j) {
    const auto col = column(j);
    float sums[I16_ROWS];
    for (int64_t r0 = 0; r0 < rows; r0 += I16_ROWS) {
      const int64_t tile = rows - r0 < I16_ROWS ? rows - r0 : I16_ROWS;
      switch (tile) {
        case 1: dot_tile_i16<1>(xq, r0, col, sums); break;
        case 2: dot_tile_i16<2>(xq, r0, col, sums); break;
        case 3: dot_tile_i16<3>(xq, r0, col, sums); break;
        default: dot_tile_i16<I16_ROWS>(xq, r0, col, sums); break;
      }
      for (int64_t t = 0; t < tile; ++t) out[(r0 + t) * n + j] = from_float<T>(sums[t]);
    }
  });
}

}  // namespace minisgl
#endif
