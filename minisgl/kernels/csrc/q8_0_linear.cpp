// GGUF's Q8_0 weights multiplied as they are stored in the file (layers/quantization/gguf_q8_0.py is the
// Python side).
//
//   q8_0_linear         out[r, j] = sum_k x[r, k] * d[j, k / 32] * q[j, k]
//
// Column j of the weight is row j of the file's bytes: one block per 32 weights along K, each an fp16
// scale d then 32 int8 codes q: 34 bytes per 32 weights, where bfloat16 takes 64. Batch-1 decode reads
// every weight once per token, as one stream of bytes, fetched ahead (PREFETCH).
//
// float32 x goes through block_linear.h's loop: d * q is exact in float32, so this is the float32 product
// with the exact dequantized weight. bfloat16 x goes through int16_linear.h's integer products (shared
// with q4_linear.cpp).

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "block_linear.h"
#include "int16_linear.h"

using namespace minisgl;

namespace {

constexpr int SIZE = 34;  // bytes per block

// 8 int8 codes as 8 floats (GCC's __builtin_convertvector does this one lane at a time)
inline V8 to_floats(const uint8_t* c) {
#if defined(__AVX2__)
  __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(c));
  return reinterpret_cast<V8>(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes)));
#else
  V8 v;
  for (int l = 0; l < 8; ++l) v[l] = static_cast<int8_t>(c[l]);
  return v;
#endif
}

// column j of the weight for block_linear.h: its row of blocks
struct Q8Column {
  static constexpr int BYTES = SIZE;
  const uint8_t* row;
  void decode(int64_t b, V8* w) const {
    const uint8_t* block = row + b * SIZE;
    const float scale = half_to_float(load_u16(block));
    for (int l = 0; l < BLOCK / 8; ++l) w[l] = to_floats(block + 2 + l * 8) * scale;  // exact: d * q
  }
};

#if MINISGL_INT16_LINEAR
// column j for int16_linear.h: a pair's 64 codes widened to four vectors of 16 int16, in x's own order;
// the two blocks' sums are brought together by one horizontal add, which leaves in each 128-bit half
// two lanes of block A, then two of block B.
struct Q8ColumnI16 {
  static constexpr bool OFFSETS = false;
  const uint8_t* row;
  static int source(int s, int l) { return s * 16 + l; }
  static int lane_block(int lane) { return (lane / 2) % 2; }
  void decode(int64_t p, int64_t blocks, __m256i* w, __m256* scale) const {
    const uint8_t* a = row + 2 * p * SIZE;
    const bool both = 2 * p + 1 < blocks;
    _mm_prefetch(reinterpret_cast<const char*>(a) + PREFETCH, _MM_HINT_T0);
    for (int s = 0; s < 4; ++s) {
      const uint8_t* c = a + (s / 2) * SIZE + 2 + (s % 2) * 16;
      w[s] = s < 2 || both ? _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(c)))
                           : _mm256_setzero_si256();
    }
    const uint32_t halves = load_u16(a) | (both ? static_cast<uint32_t>(load_u16(a + SIZE)) << 16 : 0u);
    const __m128 ab = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(halves)));
    *scale = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(ab), _mm256_setr_epi32(0, 0, 1, 1, 0, 0, 1, 1));
  }
  // each lane: 8 products of at most 127 * 32767, beyond 2^24: made float, it rounds once (as a product)
  static __m256i dot(const __m256i* w, const int16_t* xq) {
    __m256i a, b;
    pair_products(w, xq, &a, &b);
    return _mm256_hadd_epi32(a, b);
  }
};
#endif

template <typename T>
void q8_0_linear(const T* x, const uint8_t* raw, T* out, int64_t rows, int64_t n, int64_t k, int threads) {
  const int64_t row_bytes = k / BLOCK * SIZE;
#if MINISGL_INT16_LINEAR
  if constexpr (sizeof(T) == 2) {
    int16_linear(x, out, rows, n, k, threads, [=](int64_t j) { return Q8ColumnI16{raw + j * row_bytes}; });
    return;
  }
#endif
  block_linear(x, out, rows, n, k, threads, [=](int64_t j) { return Q8Column{raw + j * row_bytes}; });
}

}  // namespace

#define P(T) (const T* x, const uint8_t* raw, T* out, int64_t rows, int64_t n, int64_t k, int threads)
EXPORT_BOTH(q8_0_linear, P(float), P(uint16_t), (x, raw, out, rows, n, k, threads))
#undef P
