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
// Rows go in tiles of up to 8 per pass over a weight column, a batch cut into even tiles (5 rows: one
// pass; 9: 5 and 4), so each pair's codes are decoded once per tile. Speculative decoding's verify forward
// is 1 + K rows of one request: with K = 4, one tile of 5 took 13 to 17% less time than 4 and then 1.
// Each row's sums are added in the same order whatever the number of rows multiplied with it, so a row's
// result does not depend on the batch it came in (nor on its tile).

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

// All four vectors' products in one chain: each lane the eight products of its int16 lanes, the same integer
// as pair_products' two halves added (integer sums are exact in any order), one instruction fewer with VNNI.
inline __m256i chain_products(const __m256i* w, const int16_t* xq) {
  const __m256i* xv = reinterpret_cast<const __m256i*>(xq);
#if defined(DPWSSD)
  __m256i s = _mm256_madd_epi16(w[0], _mm256_loadu_si256(xv));
  for (int v = 1; v < 4; ++v) s = DPWSSD(s, w[v], _mm256_loadu_si256(xv + v));
  return s;
#else
  __m256i a, b;
  pair_products(w, xq, &a, &b);
  return _mm256_add_epi32(a, b);
#endif
}

constexpr int I16_ROWS = 8;  // rows of x at most per pass over a weight column

// x's rows in the Column's order: per row and pair of blocks, 64 int16 codes, and per int32 lane the
// step dx of that lane's block and a quarter of the block's float sum of x (four lanes hold each block:
// a Q4 block's offset m adds m * sum, lane by lane). The quarter sums also per block with the rows side by
// side (`sx_rows`, `stride` floats a block, zeros after the last row), for tiles of more than 4 rows.
struct RowsI16 {
  const int16_t* q;
  const float* dx;
  const float* sx;
  const float* sx_rows;
  int64_t pairs, blocks, stride;
};

inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load8(const uint16_t* p) {  // bfloat16: the top half of a float32
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
inline float hmax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}

template <class Column, typename T>
RowsI16 quantize_rows(const T* x, int64_t rows, int64_t k) {
  static thread_local std::vector<int16_t> qbuf;
  static thread_local std::vector<float> dxbuf, sxbuf, sxrows;
  const int64_t blocks = k / BLOCK, pairs = (blocks + 1) / 2, stride = rows + 8;
  qbuf.assign(rows * pairs * 64, 0);
  dxbuf.assign(rows * pairs * 8, 0.f);
  sxbuf.assign(rows * pairs * 8, 0.f);
  sxrows.assign(pairs * 2 * stride, 0.f);
  int where[64];  // for each int16 position of a pair, the index (0..63) of the x value it holds
  for (int s = 0; s < 4; ++s)
    for (int l = 0; l < 16; ++l) where[s * 16 + l] = Column::source(s, l);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t p = 0; p < pairs; ++p) {
      int16_t codes[64] = {};
      float dx[2] = {0.f, 0.f}, sx[2] = {0.f, 0.f};
      for (int h = 0; h < 2 && 2 * p + h < blocks; ++h) {
        const T* xb = x + r * k + (2 * p + h) * BLOCK;
        __m256 v[4], amax8 = _mm256_setzero_ps();
        const __m256 sign = _mm256_set1_ps(-0.f);
        for (int l = 0; l < 4; ++l) {
          v[l] = load8(xb + 8 * l);
          amax8 = _mm256_max_ps(amax8, _mm256_andnot_ps(sign, v[l]));  // a NaN may stay: so will the sum
        }
        float amax = hmax(amax8), sum = 0.f;
        for (int i = 0; i < BLOCK; ++i) sum += to_float(xb[i]);  // in order: the same sum on every CPU
        sx[h] = sum * 0.25f;  // exact
        if (std::isinf(amax) || std::isnan(sum)) {  // an inf or NaN in x
          dx[h] = NAN;  // makes every sum of the row NaN, as the float product would
          continue;
        }
        if (amax == 0.f) continue;  // codes stay 0
        int e;
        std::frexp(amax, &e);  // amax < 2^e
        dx[h] = std::ldexp(1.f, e - 15);
        // x / dx rounded to the nearest integer, ties to even: |q| <= 32768, kept within +-32767
        const __m256 inv = _mm256_set1_ps(std::ldexp(1.f, 15 - e));
        const __m256 top = _mm256_set1_ps(32767.f), bottom = _mm256_set1_ps(-32767.f);
        for (int l = 0; l < 4; l += 2) {
          __m256i q[2];
          for (int u = 0; u < 2; ++u) {
            const __m256 scaled = _mm256_mul_ps(v[l + u], inv);  // exact: inv is a power of two
            const __m256 r = _mm256_round_ps(scaled, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            q[u] = _mm256_cvtps_epi32(_mm256_max_ps(_mm256_min_ps(r, top), bottom));
          }
          // packs works per 128-bit half: reorder the 64-bit quarters back to x's order
          const __m256i packed = _mm256_permute4x64_epi64(_mm256_packs_epi32(q[0], q[1]), 0xD8);
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(codes + h * BLOCK + 8 * l), packed);
        }
      }
      int16_t* out = qbuf.data() + (r * pairs + p) * 64;
      for (int i = 0; i < 64; ++i) out[i] = codes[where[i]];
      for (int h = 0; h < 2; ++h) sxrows[(2 * p + h) * stride + r] = sx[h];
      for (int lane = 0; lane < 8; ++lane) {
        dxbuf[(r * pairs + p) * 8 + lane] = dx[Column::lane_block(lane)];
        sxbuf[(r * pairs + p) * 8 + lane] = sx[Column::lane_block(lane)];
      }
    }
  return {qbuf.data(), dxbuf.data(), sxbuf.data(), sxrows.data(), pairs, blocks, stride};
}

// Rows [r0, r0 + TILE) times one weight column: per row one accumulator for the products and, for a
// Column with offsets (Q4), one for m * sum. Up to 4 rows, both fit AVX2's 16 registers with the pair's
// weights and go in one loop. With more, the m * sum terms get a second loop over the column's blocks: the
// four lanes of a block hold the same value, so that loop keeps one sum per block of the pair (block A's
// for lanes 0-3, B's for 4-7) with the tile's rows side by side in one vector, and spreads them over the
// lanes at the end: the same multiply-adds in the same order as the one loop, so the same result.
template <int TILE, int C, class Column>
inline void dot_tile_i16(const RowsI16& x, int64_t r0, const Column* col, float (*sums)[I16_ROWS]) {
  constexpr bool fused = Column::OFFSETS && TILE <= 4;
  __m256 acc[C][TILE], off[C][TILE];
  for (int c = 0; c < C; ++c)
    for (int t = 0; t < TILE; ++t) acc[c][t] = off[c][t] = _mm256_setzero_ps();
  for (int64_t p = 0; p < x.pairs; ++p) {
    __m256i w[C][4];
    __m256 d[C], m[C];
    for (int c = 0; c < C; ++c) {
      if constexpr (fused)
        col[c].decode(p, x.blocks, w[c], &d[c], &m[c]);
      else
        col[c].decode(p, x.blocks, w[c], &d[c]);
    }
    for (int t = 0; t < TILE; ++t) {
      const int64_t at = (r0 + t) * x.pairs + p;
      const __m256 dx = _mm256_loadu_ps(x.dx + at * 8);
      for (int c = 0; c < C; ++c) {
        const __m256i s = Column::dot(w[c], x.q + at * 64);
        acc[c][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(d[c], dx), acc[c][t]);
        if constexpr (fused) off[c][t] = _mm256_fmadd_ps(m[c], _mm256_loadu_ps(x.sx + at * 8), off[c][t]);
      }
    }
  }
  for (int c = 0; c < C; ++c) {
    if constexpr (Column::OFFSETS && !fused) {
      static_assert(TILE <= 8, "one vector of rows");
      __m256 sum_a = _mm256_setzero_ps(), sum_b = _mm256_setzero_ps();
      for (int64_t p = 0; p < x.pairs; ++p) {
        const __m128 ab = col[c].offsets(p, x.blocks);  // [mA, mB, ...]
        const float* sx = x.sx_rows + 2 * p * x.stride + r0;
        sum_a = _mm256_fmadd_ps(_mm256_broadcastss_ps(ab), _mm256_loadu_ps(sx), sum_a);
        const __m256 m_b = _mm256_broadcastss_ps(_mm_movehdup_ps(ab));
        sum_b = _mm256_fmadd_ps(m_b, _mm256_loadu_ps(sx + x.stride), sum_b);
      }
      float a[8], b[8];
      _mm256_storeu_ps(a, sum_a);
      _mm256_storeu_ps(b, sum_b);
      for (int t = 0; t < TILE; ++t) off[c][t] = _mm256_setr_ps(a[t], a[t], a[t], a[t], b[t], b[t], b[t], b[t]);
    }
    for (int t = 0; t < TILE; ++t) sums[c][t] = hsum(reinterpret_cast<V8>(_mm256_add_ps(acc[c][t], off[c][t])));
  }
}

// columns j0 .. j0 + C - 1, every row
template <int C, typename T, class Column>
inline void columns_i16(const RowsI16& xq, const Column* col, T* out, int64_t rows, int64_t n, int64_t j0) {
  float sums[C][I16_ROWS];
  for (int64_t r0 = 0, passes = (rows + I16_ROWS - 1) / I16_ROWS; r0 < rows; --passes) {
    const int64_t tile = (rows - r0 + passes - 1) / passes;  // even tiles: 5 rows are one pass, 9 are 5 + 4
    switch (tile) {
      case 1: dot_tile_i16<1, C>(xq, r0, col, sums); break;
      case 2: dot_tile_i16<2, C>(xq, r0, col, sums); break;
      case 3: dot_tile_i16<3, C>(xq, r0, col, sums); break;
      case 4: dot_tile_i16<4, C>(xq, r0, col, sums); break;
      case 5: dot_tile_i16<5, C>(xq, r0, col, sums); break;
      case 6: dot_tile_i16<6, C>(xq, r0, col, sums); break;
      case 7: dot_tile_i16<7, C>(xq, r0, col, sums); break;
      default: dot_tile_i16<I16_ROWS, C>(xq, r0, col, sums); break;
    }
    for (int c = 0; c < C; ++c)
      for (int64_t t = 0; t < tile; ++t) out[(r0 + t) * n + j0 + c] = from_float<T>(sums[c][t]);
    r0 += tile;
  }
}

// Columns per pass over x. With AVX-512's 32 vector registers two Q4 columns go side by side: they share
// each load of x, and a batch-1 product reads two streams of weight bytes at once. (Q8_0's two columns of 8
// rows do not fit the registers.)
template <class Column>
constexpr int i16_columns() {
#if defined(__AVX512VL__)
  return Column::OFFSETS ? 2 : 1;
#else
  return 1;
#endif
}

template <typename T, class MakeColumn>
void int16_linear(const T* x, T* out, int64_t rows, int64_t n, int64_t k, int threads, MakeColumn column) {
  using Column = decltype(column(0));
  const RowsI16 xq = quantize_rows<Column>(x, rows, k);
  // the start of the weight, which no block of the loop asks for ahead of time
  const char* start = reinterpret_cast<const char*>(column(0).row);
  for (int off = 0; off < PREFETCH; off += 64) _mm_prefetch(start + off, _MM_HINT_T0);
  constexpr int I16_COLUMNS = i16_columns<Column>();
  const int64_t groups = (n + I16_COLUMNS - 1) / I16_COLUMNS;
  parallel_for(groups, threads, n * k * rows >= 65536, [&](int64_t g) {
    const int64_t j0 = g * I16_COLUMNS;
    if (j0 + I16_COLUMNS <= n) {
      Column cols[I16_COLUMNS] = {column(j0)};
      for (int c = 1; c < I16_COLUMNS; ++c) cols[c] = column(j0 + c);
      columns_i16<I16_COLUMNS>(xq, cols, out, rows, n, j0);
    } else {
      for (int64_t j = j0; j < n; ++j) {
        const Column col = column(j);
        columns_i16<1>(xq, &col, out, rows, n, j);
      }
    }
  });
}

}  // namespace minisgl
#endif
