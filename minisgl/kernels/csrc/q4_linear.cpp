// GGUF's Q4_0 and Q4_1 weights multiplied as they are stored (layers/quantization/gguf_q4.py is the
// Python side).
//
//   q4_linear         out[r, j] = sum_k x[r, k] * (q[j, k] * d[j, k / 32] + m[j, k / 32])
//
// A block keeps 32 weights along K as 4-bit codes q in 0..15, two to a byte (weight i in the low nibble
// of byte i, weight i + 16 in the high nibble, as GGUF stores them), with a scale d and an offset m per
// block: Q4_1 stores m, Q4_0 has m = -8 d. q * d is exact in float32 (11 + 4 significant bits) and one
// fused multiply-add rounds q * d + m once, so each weight is exactly the float32 value gguf's own
// dequantizing gives (tests/kernels/test_q4_linear.py). The products with x then add in float32.
//
// Batch-1 decode reads every weight once per token: here half a byte plus 8 bytes per 32 weights, where
// a bfloat16 weight is 2 bytes. Each thread takes whole output columns j; a block's 32 weights are made
// float once and used for up to ROWS rows of x (x is made float32 once, up front).

#include <cmath>
#include <vector>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

#include "common.h"

using namespace minisgl;

namespace {

typedef float V8 __attribute__((vector_size(32)));
constexpr int BLOCK = 32;
constexpr int ROWS = 8;  // rows of x per pass over a weight column

// one block's 32 weights as four vectors of 8 floats: q * d + m, rounded once
inline void decode_block(const uint8_t* c, float d, float m, V8* w) {
#if defined(__AVX2__) && defined(__FMA__)
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(c));
  const __m128i nibble = _mm_set1_epi8(0x0F);
  const __m128i lo = _mm_and_si128(bytes, nibble);                     // weights 0..15
  const __m128i hi = _mm_and_si128(_mm_srli_epi16(bytes, 4), nibble);  // weights 16..31
  const __m256 vd = _mm256_set1_ps(d), vm = _mm256_set1_ps(m);
  const __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
  for (int l = 0; l < 4; ++l) {
    const __m256 q = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(parts[l]));
    w[l] = reinterpret_cast<V8>(_mm256_fmadd_ps(q, vd, vm));
  }
#else
  for (int i = 0; i < 16; ++i) {
    w[i / 8][i % 8] = std::fma(static_cast<float>(c[i] & 0x0F), d, m);
    w[2 + i / 8][i % 8] = std::fma(static_cast<float>(c[i] >> 4), d, m);
  }
#endif
}

inline float hsum(V8 v) {
  float s = 0.f;
  for (int l = 0; l < 8; ++l) s += v[l];
  return s;
}

// Rows [r0, r0 + TILE) of x times weight column j, with about eight independent accumulators in all.
template <int TILE>
inline void dot_tile(const float* xf, int64_t k, const uint8_t* q, const float* d, const float* m, int64_t blocks,
                     float* sums) {
  constexpr int A = TILE >= 8 ? 1 : (TILE >= 4 ? 2 : 4);  // accumulators per row
  V8 acc[TILE][A] = {};
  for (int64_t b = 0; b < blocks; ++b) {
    V8 w[BLOCK / 8];
    decode_block(q + b * (BLOCK / 2), d[b], m[b], w);
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
void q4_linear(const T* x, const uint8_t* codes, const float* scales, const float* mins, T* out, int64_t rows,
               int64_t n, int64_t k, int threads) {
  static thread_local std::vector<float> xbuf;
  if (static_cast<int64_t>(xbuf.size()) < rows * k) xbuf.resize(rows * k);
  float* xf = xbuf.data();
  for (int64_t i = 0; i < rows * k; ++i) xf[i] = to_float(x[i]);
  const int64_t blocks = k / BLOCK;
#pragma omp parallel for num_threads(threads) schedule(static) if (n * k * rows >= 65536)
  for (int64_t j = 0; j < n; ++j) {
    const uint8_t* q = codes + j * (k / 2);
    const float* d = scales + j * blocks;
    const float* m = mins + j * blocks;
    float sums[ROWS];
    for (int64_t r0 = 0; r0 < rows; r0 += ROWS) {
      const float* xr = xf + r0 * k;
      const int64_t tile = rows - r0 < ROWS ? rows - r0 : ROWS;
      switch (tile) {
        case 1: dot_tile<1>(xr, k, q, d, m, blocks, sums); break;
        case 2: dot_tile<2>(xr, k, q, d, m, blocks, sums); break;
        case 3: dot_tile<3>(xr, k, q, d, m, blocks, sums); break;
        case 4: dot_tile<4>(xr, k, q, d, m, blocks, sums); break;
        case 5: dot_tile<5>(xr, k, q, d, m, blocks, sums); break;
        case 6: dot_tile<6>(xr, k, q, d, m, blocks, sums); break;
        case 7: dot_tile<7>(xr, k, q, d, m, blocks, sums); break;
        default: dot_tile<ROWS>(xr, k, q, d, m, blocks, sums); break;
      }
      for (int64_t t = 0; t < tile; ++t) out[(r0 + t) * n + j] = from_float<T>(sums[t]);
    }
  }
}

}  // namespace

#define P(T) (const T* x, const uint8_t* codes, const float* scales, const float* mins, T* out, int64_t rows, \
              int64_t n, int64_t k, int threads)
EXPORT_BOTH(q4_linear, P(float), P(uint16_t), (x, codes, scales, mins, out, rows, n, k, threads))
#undef P
