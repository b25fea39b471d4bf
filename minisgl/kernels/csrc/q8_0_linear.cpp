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
// The loop over columns and rows is block_linear.h's, shared with q4_linear.cpp.

#if defined(__AVX2__) || defined(__F16C__)
#include <immintrin.h>
#endif

#include "block_linear.h"

using namespace minisgl;

namespace {

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

// column j of the weight: its int8 codes and its blocks' fp16 scales
struct Q8Column {
  const int8_t* q;
  const uint16_t* d;
  void decode(int64_t b, V8* w) const {
    const float scale = half_to_float(d[b]);
    for (int l = 0; l < BLOCK / 8; ++l) w[l] = to_floats(q + b * BLOCK + l * 8) * scale;  // exact: d * q
  }
};

template <typename T>
void q8_0_linear(const T* x, const int8_t* codes, const uint16_t* scales, T* out, int64_t rows, int64_t n, int64_t k,
                 int threads) {
  block_linear(x, out, rows, n, k, threads,
               [=](int64_t j) { return Q8Column{codes + j * k, scales + j * (k / BLOCK)}; });
}

}  // namespace

#define P(T) (const T* x, const int8_t* codes, const uint16_t* scales, T* out, int64_t rows, int64_t n, int64_t k, \
              int threads)
EXPORT_BOTH(q8_0_linear, P(float), P(uint16_t), (x, codes, scales, out, rows, n, k, threads))
#undef P
