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
// a bfloat16 weight is 2 bytes. float32 x goes through block_linear.h's loop (each weight made float, as
// above); bfloat16 x through int16_linear.h's integer products, where the codes are never made float.

#include <cmath>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

#include "block_linear.h"
#include "int16_linear.h"

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

#if MINISGL_INT16_LINEAR
// column j for int16_linear.h. Two blocks' 32 bytes as 16 uint16 lanes: lane l holds bytes 2t and 2t + 1
// (t = l mod 8) of block l / 8 of the pair, so its four nibbles are that block's weights 2t, 2t + 16,
// 2t + 1 and 2t + 17; shifting by 0, 4, 8 and 12 and masking gives the four int16 vectors.
struct Q4ColumnI16 {
  const uint8_t* q;
  const float* d;
  const float* m;
  static int source(int s, int l) {
    const int t = l % 8, offsets[4] = {0, 16, 1, 17};
    return (l / 8) * BLOCK + 2 * t + offsets[s];
  }
  static int lane_block(int lane) { return lane / 4; }  // madd keeps each 128-bit half: lanes 0-3 block A
  void decode(int64_t p, int64_t blocks, __m256i* w, __m256* scale) const {
    const bool both = 2 * p + 1 < blocks;
    const __m256i v = both ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + p * BLOCK))
                           : _mm256_zextsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + p * BLOCK)));
    const __m256i nibble = _mm256_set1_epi16(0x000F);
    w[0] = _mm256_and_si256(v, nibble);
    w[1] = _mm256_and_si256(_mm256_srli_epi16(v, 4), nibble);
    w[2] = _mm256_and_si256(_mm256_srli_epi16(v, 8), nibble);
    w[3] = _mm256_srli_epi16(v, 12);
    const __m128 ab = both ? _mm_castsi128_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(d + 2 * p)))
                           : _mm_set_ss(d[2 * p]);
    *scale = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(ab), _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1));
  }
  static __m256i dot(const __m256i* w, const int16_t* xq) {
    const __m256i* xv = reinterpret_cast<const __m256i*>(xq);
    const __m256i a = _mm256_add_epi32(_mm256_madd_epi16(w[0], _mm256_loadu_si256(xv)),
                                       _mm256_madd_epi16(w[1], _mm256_loadu_si256(xv + 1)));
    const __m256i b = _mm256_add_epi32(_mm256_madd_epi16(w[2], _mm256_loadu_si256(xv + 2)),
                                       _mm256_madd_epi16(w[3], _mm256_loadu_si256(xv + 3)));
    return _mm256_add_epi32(a, b);  // each lane: 8 products of at most 15 * 32767, exact in float too
  }
  float offset_sum(const float* sx, int64_t blocks) const { return offset_dot(m, sx, blocks); }
};
#endif

template <typename T>
void q4_linear(const T* x, const uint8_t* codes, const float* scales, const float* mins, T* out, int64_t rows,
               int64_t n, int64_t k, int threads) {
  const int64_t blocks = k / BLOCK;
#if MINISGL_INT16_LINEAR
  if constexpr (sizeof(T) == 2) {
    int16_linear(x, out, rows, n, k, threads,
                 [=](int64_t j) { return Q4ColumnI16{codes + j * (k / 2), scales + j * blocks, mins + j * blocks}; });
    return;
  }
#endif
  block_linear(x, out, rows, n, k, threads,
               [=](int64_t j) { return Q4Column{codes + j * (k / 2), scales + j * blocks, mins + j * blocks}; });
}

}  // namespace

#define P(T) (const T* x, const uint8_t* codes, const float* scales, const float* mins, T* out, int64_t rows, \
              int64_t n, int64_t k, int threads)
EXPORT_BOTH(q4_linear, P(float), P(uint16_t), (x, codes, scales, mins, out, rows, n, k, threads))
#undef P
