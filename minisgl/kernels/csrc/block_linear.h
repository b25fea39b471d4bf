// The float32 loop shared by the kernels that multiply GGUF's quantized blocks as stored (q8_0_linear.cpp,
// q4_linear.cpp): out[r, j] = sum_k x[r, k] * w[j, k], where each file says how one block of 32 weights of
// column j becomes floats (its Column type's decode). int16_linear.h is the bfloat16 loop.
//
// Each thread takes whole output columns j; a block's 32 weights are made float once and used for up to
// ROWS rows of x at a time (x is made float32 once, up front).

#pragma once

#include <vector>

#if defined(__F16C__)
#include <immintrin.h>
#endif

#include "common.h"

namespace minisgl {

typedef float V8 __attribute__((vector_size(32)));
constexpr int BLOCK = 32;
constexpr int ROWS = 8;  // rows of x per pass over a weight column
// How far ahead of the block being multiplied its weight's bytes are asked for (a software prefetch): the
// columns lie one after another, so this is one stream. Without it batch-1 products waited on memory (the
// logits product ran at 5.7 GB/s; 4 KB ahead, at 9 to 11); 16 KB ahead took a decode step's Q4 products
// from about 13.5 ms to 11 when the weights come from memory rather than from the cache.
constexpr int PREFETCH = 16384;

inline uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

inline float half_to_float(uint16_t h) {
#if defined(__F16C__)
  return _cvtsh_ss(h);
#else
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  if (exp == 0) return (sign ? -1.f : 1.f) * std::ldexp(static_cast<float>(man), -24);  // zero, subnormal
  const uint32_t bits = sign | (exp == 31 ? 0x7f800000u : (exp + 112) << 23) | (man << 13);
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
#endif
}

inline float hsum(V8 v) {
  float s = 0.f;
  for (int l = 0; l < 8; ++l) s += v[l];
  return s;
}

// Rows [r0, r0 + TILE) of x times one weight column. About eight independent accumulators in all (four per
// row for one row, one per row for eight), so that consecutive multiply-adds do not wait on each other
// and everything stays in AVX2's sixteen vector registers.
template <int TILE, class Column>
inline void dot_tile(const float* xf, int64_t k, const Column& col, int64_t blocks, float* sums) {
  constexpr int A = TILE >= 8 ? 1 : (TILE >= 4 ? 2 : 4);  // accumulators per row
  V8 acc[TILE][A] = {};
  for (int64_t b = 0; b < blocks; ++b) {
    V8 w[BLOCK / 8];
    __builtin_prefetch(col.row + b * Column::BYTES + PREFETCH);
    col.decode(b, w);
    for (int t = 0; t < TILE; ++t)
      for (int l = 0; l < BLOCK / 8; ++l) {
        V8 xv;
        std::memcpy(&xv, xf + t * k + b * BLOCK + l * 8, 32);
        acc[t][l % A] += w[l] * xv;
      }
  }
  for (int t = 0; t < TILE; ++t) {
    V8 total = acc[t][0];
    for (int a = 1; a < A; ++a) total += acc[t][a];
    sums[t] = hsum(total);
  }
}

// `column(j)` gives column j's Column, whose decode(b, w) writes block b's 32 weights into w[0..3].
template <typename T, class MakeColumn>
void block_linear(const T* x, T* out, int64_t rows, int64_t n, int64_t k, int threads, MakeColumn column) {
  static thread_local std::vector<float> xbuf;
  if (static_cast<int64_t>(xbuf.size()) < rows * k) xbuf.resize(rows * k);
  float* xf = xbuf.data();
  for (int64_t i = 0; i < rows * k; ++i) xf[i] = to_float(x[i]);
  const int64_t blocks = k / BLOCK;
  parallel_for(n, threads, n * k * rows >= 65536, [&](int64_t j) {
    const auto col = column(j);
    float sums[ROWS];
    for (int64_t r0 = 0; r0 < rows; r0 += ROWS) {
      const float* xr = xf + r0 * k;
      const int64_t tile = rows - r0 < ROWS ? rows - r0 : ROWS;
      switch (tile) {
        case 1: dot_tile<1>(xr, k, col, blocks, sums); break;
        case 2: dot_tile<2>(xr, k, col, blocks, sums); break;
        case 3: dot_tile<3>(xr, k, col, blocks, sums); break;
        case 4: dot_tile<4>(xr, k, col, blocks, sums); break;
        case 5: dot_tile<5>(xr, k, col, blocks, sums); break;
        case 6: dot_tile<6>(xr, k, col, blocks, sums); break;
        case 7: dot_tile<7>(xr, k, col, blocks, sums); break;
        default: dot_tile<ROWS>(xr, k, col, blocks, sums); break;
      }
      for (int64_t t = 0; t < tile; ++t) out[(r0 + t) * n + j] = from_float<T>(sums[t]);
    }
  });
}

}  // namespace minisgl
