// GGUF's Q8_0 weights multiplied as they are stored (layers/quantization/gguf.py is the Python side).
//
//   q8_0_linear         out[r, j] = sum_k x[r, k] * d[j, k / 32] * q[j, k]
//
// Q8_0 keeps a weight matrix [N, K] as blocks of 32 int8 codes q along K, each block with its own scale
// d (an fp16, passed here as its 16 bits, as stored). d * q is exact in float32 (11 + 8 significant bits),
// so this is the float32 product with the exact dequantized weight: it differs from multiplying by the
// dequantized bfloat16 weight only by that weight's rounding and the order of the float32 sums. It reads
// one byte per weight where a bfloat16 weight is two: batch-1 decode, which streams every weight once
// per token, reads half as much.
//
// Each thread takes whole output columns j; a block's 32 weights are made float once and used for up to
// ROWS rows of x at a time (x is made float32 once, up front).

#include <vector>

#if defined(__AVX2__) || defined(__F16C__)
#include <immintrin.h>
#endif

#include "common.h"

using namespace minisgl;

namespace {

typedef float V8 __attribute__((vector_size(32)));
constexpr int BLOCK = 32;
constexpr int ROWS = 8;  // rows of x per pass over a weight column

// 8 int8 codes as 8 floats (GCC's __builtin_convertvector does this one lane at a time)
inline V8 to_floats(const int8_t* c) {
#if defined(__AVX2__)
  __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(c));
  return reinterpret_cast<V8>(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes)));
#else
  V8 v;
  for (int l = 0; l < 8; ++l) v[l] = c[l];
  return v;
#endif
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

// Rows [r0, r0 + TILE) of x times weight column j. About eight independent accumulators in all (four per
// row for one row, one per row for eight), so that consecutive multiply-adds do not wait on each other
// and everything stays in AVX2's sixteen vector registers.
template <int TILE>
inline void dot_tile(const float* xf, int64_t k, const int8_t* q, const uint16_t* d, int64_t blocks, float* sums) {
  constexpr int A = TILE >= 8 ? 1 : (TILE >= 4 ? 2 : 4);  // accumulators per row
  V8 acc[TILE][A] = {};
  for (int64_t b = 0; b < blocks; ++b) {
    V8 w[BLOCK / 8];
    const float scale = half_to_float(d[b]);
    for (int l = 0; l < BLOCK / 8; ++l) {
      w[l] = to_floats(q + b * BLOCK + l * 8) * scale;  // exact: the dequantized weight
    }
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

template <typename T>
void q8_0_linear(const T* x, const int8_t* codes, const uint16_t* scales, T* out, int64_t rows, int64_t n,
                 int64_t k, int threads) {
  static thread_local std::vector<float> xbuf;
  if (static_cast<int64_t>(xbuf.size()) < rows * k) xbuf.resize(rows * k);
  float* xf = xbuf.data();
  for (int64_t i = 0; i < rows * k; ++i) xf[i] = to_float(x[i]);
  const int64_t blocks = k / BLOCK;
#pragma omp parallel for num_threads(threads) schedule(static) if (n * k * rows >= 65536)
  for (int64_t j = 0; j < n; ++j) {
    const int8_t* q = codes + j * k;
    const uint16_t* d = scales + j * blocks;
    float sums[ROWS];
    for (int64_t r0 = 0; r0 < rows; r0 += ROWS) {
      const float* xr = xf + r0 * k;
      const int64_t tile = rows - r0 < ROWS ? rows - r0 : ROWS;
      switch (tile) {
        case 1: dot_tile<1>(xr, k, q, d, blocks, sums); break;
        case 2: dot_tile<2>(xr, k, q, d, blocks, sums); break;
        case 3: dot_tile<3>(xr, k, q, d, blocks, sums); break;
        case 4: dot_tile<4>(xr, k, q, d, blocks, sums); break;
        case 5: dot_tile<5>(xr, k, q, d, blocks, sums); break;
        case 6: dot_tile<6>(xr, k, q, d, blocks, sums); break;
        case 7: dot_tile<7>(xr, k, q, d, blocks, sums); break;
        default: dot_tile<ROWS>(xr, k, q, d, blocks, sums); break;
      }
      for (int64_t t = 0; t < tile; ++t) out[(r0 + t) * n + j] = from_float<T>(sums[t]);
    }
  }
}

}  // namespace

#define P(T) (const T* x, const int8_t* codes, const uint16_t* scales, T* out, int64_t rows, int64_t n, int64_t k, \
              int threads)
EXPORT_BOTH(q8_0_linear, P(float), P(uint16_t), (x, codes, scales, out, rows, n, k, threads))
#undef P
