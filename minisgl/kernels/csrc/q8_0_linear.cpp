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
// float32 x goes through block_linear.h's loop (each weight made float); bfloat16 x through
// int16_linear.h's integer products, shared with q4_linear.cpp.

#if defined(__AVX2__) || defined(__F16C__)
#include <immintrin.h>
#endif

#include "block_linear.h"
#include "int16_linear.h"

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

#if MINISGL_INT16_LINEAR
// column j for int16_linear.h: a pair's 64 codes widened to four vectors of 16 int16, in x's own order;
// the two blocks' sums are brought together by one horizontal add, which leaves in each 128-bit half
// two lanes of block A, then two of block B.
struct Q8ColumnI16 {
  const int8_t* q;
  const uint16_t* d;
  static int source(int s, int l) { return s * 16 + l; }
  static int lane_block(int lane) { return (lane / 2) % 2; }
  void decode(int64_t p, int64_t blocks, __m256i* w, __m256* scale) const {
    const bool both = 2 * p + 1 < blocks;
    const int8_t* c = q + p * 2 * BLOCK;
    for (int s = 0; s < 4; ++s)
      w[s] = s < 2 || both ? _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(c + s * 16)))
                           : _mm256_setzero_si256();
    uint32_t halves = d[2 * p];  // the two blocks' fp16 scales (the second 0 past the last block)
    if (both) std::memcpy(&halves, d + 2 * p, 4);
    const __m128 ab = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(halves)));
    *scale = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(ab), _mm256_setr_epi32(0, 0, 1, 1, 0, 0, 1, 1));
  }
  static __m256i dot(const __m256i* w, const int16_t* xq) {
    const __m256i* xv = reinterpret_cast<const __m256i*>(xq);
    const __m256i a = _mm256_add_epi32(_mm256_madd_epi16(w[0], _mm256_loadu_si256(xv)),
                                       _mm256_madd_epi16(w[1], _mm256_loadu_si256(xv + 1)));
    const __m256i b = _mm256_add_epi32(_mm256_madd_epi16(w[2], _mm256_loadu_si256(xv + 2)),
                                       _mm256_madd_epi16(w[3], _mm256_loadu_si256(xv + 3)));
    // each lane: 8 products of at most 127 * 32767, beyond 2^24: made float, it rounds once (as a product)
    return _mm256_hadd_epi32(a, b);
  }
  float offset_sum(const float*, int64_t) const { return 0.f; }
};
#endif

template <typename T>
void q8_0_linear(const T* x, const int8_t* codes, const uint16_t* scales, T* out, int64_t rows, int64_t n, int64_t k,
                 int threads) {
#if MINISGL_INT16_LINEAR
  if constexpr (sizeof(T) == 2) {
    int16_linear(x, out, rows, n, k, threads,
                 [=](int64_t j) { return Q8ColumnI16{codes + j * k, scales + j * (k / BLOCK)}; });
    return;
  }
#endif
  block_linear(x, out, rows, n, k, threads,
               [=](int64_t j) { return Q8Column{codes + j * k, scales + j * (k / BLOCK)}; });
}

}  // namespace

#define P(T) (const T* x, const int8_t* codes, const uint16_t* scales, T* out, int64_t rows, int64_t n, int64_t k, \
              int threads)
EXPORT_BOTH(q8_0_linear, P(float), P(uint16_t), (x, codes, scales, out, rows, n, k, threads))
#undef P
