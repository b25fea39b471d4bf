// GGUF's Q4_0 and Q4_1 weights multiplied as they are stored (layers/quantization/gguf_q4.py is the
// Python side).
//
//   q4_linear         out[r, j] = sum_k x[r, k] * (q[j, k] * d[j, k / 32] + m[j, k / 32])
//
// A block keeps 32 weights along K as 4-bit codes q in 0..15, two to a byte (weight i in the low nibble
// of byte i, weight i + 16 in the high nibble, as GGUF stores them), with a scale d and an offset m per
// block: Q4_1 stores m, Q4_0 has m = -8 d. q * d is exact in float32 (11 + 4 significant bits) and one
// fused multiply-add rounds q * d + m once, so each weight is exactly the float32 value gguf's own
// dequantizing gives (tests/model_loader/test_gguf_q4.py). The products with x then add in float32.
//
// Batch-1 decode reads every weight once per token: here half a byte plus 8 bytes per 32 weights, where
// a bfloat16 weight is 2 bytes. The loop over columns and rows is block_linear.h's, shared with
// q8_0_linear.cpp.

#include <cmath>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

#include "block_linear.h"

using namespace minisgl;

namespace {

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

// column j of the weight: its packed codes and its blocks' d and m
struct Q4Column {
  const uint8_t* q;
  const float* d;
  const float* m;
  void decode(int64_t b, V8* w) const { decode_block(q + b * (BLOCK / 2), d[b], m[b], w); }
};

template <typename T>
void q4_linear(const T* x, const uint8_t* codes, const float* scales, const float* mins, T* out, int64_t rows,
               int64_t n, int64_t k, int threads) {
  const int64_t blocks = k / BLOCK;
  block_linear(x, out, rows, n, k, threads,
               [=](int64_t j) { return Q4Column{codes + j * (k / 2), scales + j * blocks, mins + j * blocks}; });
}

}  // namespace

#define P(T) (const T* x, const uint8_t* codes, const float* scales, const float* mins, T* out, int64_t rows, \
              int64_t n, int64_t k, int threads)
EXPORT_BOTH(q4_linear, P(float), P(uint16_t), (x, codes, scales, mins, out, rows, n, k, threads))
#undef P
