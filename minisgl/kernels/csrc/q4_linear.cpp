// GGUF's Q4_0 and Q4_1 weights multiplied as they are stored in the file (layers/quantization/gguf_q4.py is
// the Python side).
//
//   q4_linear         out[r, j] = sum_k x[r, k] * (q[j, k] * d[j, k / 32] + m[j, k / 32])
//
// Column j of the weight is row j of the file's bytes: one block per 32 weights along K, each block an
// fp16 scale d, for Q4_1 an fp16 offset m (Q4_0 has m = -8 d), then 16 bytes of 4-bit codes q in 0..15
// (weight i in the low nibble of byte i, weight i + 16 in the high nibble): 18 or 20 bytes per 32
// weights, where bfloat16 takes 64. Batch-1 decode reads every weight once per token, as one stream of
// bytes, fetched ahead (PREFETCH).
//
// float32 x goes through block_linear.h's loop: each weight is made float32 first, q * d + m in one fused
// multiply-add (q * d is exact in float32, so each weight is exactly the float32 value gguf's own
// dequantizing gives; tests/model_loader/test_gguf_q4.py), then multiplied by x. bfloat16 x goes through
// int16_linear.h: the codes are never made float, x is made int16 per block, and the products are integers.

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

// column j of the weight for block_linear.h: its row of blocks, SIZE bytes each (18: Q4_0, 20: Q4_1)
template <int SIZE>
struct Q4Column {
  static constexpr int BYTES = SIZE;
  const uint8_t* row;
  void decode(int64_t b, V8* w) const {
    const uint8_t* block = row + b * SIZE;
    const float d = half_to_float(load_u16(block));
    const float m = SIZE == 20 ? half_to_float(load_u16(block + 2)) : -8 * d;  // -8 d: exact
    decode_block(block + SIZE - 16, d, m, w);
  }
};

#if MINISGL_INT16_LINEAR
// column j for int16_linear.h. Two blocks' 32 bytes of codes as 16 uint16 lanes: lane l holds bytes 2t and
// 2t + 1 (t = l mod 8) of block l / 8 of the pair, so its four nibbles are that block's weights 2t,
// 2t + 16, 2t + 1 and 2t + 17; shifting by 0, 4, 8 and 12 and masking gives the four int16 vectors.
template <int SIZE>
struct Q4ColumnI16 {
  static constexpr bool OFFSETS = true;
  const uint8_t* row;
  static int source(int s, int l) {
    const int t = l % 8, offsets[4] = {0, 16, 1, 17};
    return (l / 8) * BLOCK + 2 * t + offsets[s];
  }
  static int lane_block(int lane) { return lane / 4; }  // madd keeps each 128-bit half: lanes 0-3 block A
  // the codes of pair p as four int16 vectors, and d of both blocks (four lanes each)
  void decode(int64_t p, int64_t blocks, __m256i* w, __m256* scale) const {
    codes(p, blocks, w);
    const __m256 ab = _mm256_castps128_ps256(halves(p, blocks, 0));
    *scale = _mm256_permutevar8x32_ps(ab, _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1));
  }
  // the same and m of both blocks (Q4_0: -8 d), from one conversion of [dA, mA, dB, mB]
  void decode(int64_t p, int64_t blocks, __m256i* w, __m256* scale, __m256* offset) const {
    codes(p, blocks, w);
    const uint8_t* a = row + 2 * p * SIZE;
    const bool both = 2 * p + 1 < blocks;
    const uint32_t head_a = SIZE == 20 ? load_u32(a) : load_u16(a);
    const uint32_t head_b = both ? (SIZE == 20 ? load_u32(a + SIZE) : load_u16(a + SIZE)) : 0u;
    const __m128 dm = _mm_cvtph_ps(_mm_set_epi32(0, 0, static_cast<int>(head_b), static_cast<int>(head_a)));
    *scale = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(dm), _mm256_setr_epi32(0, 0, 0, 0, 2, 2, 2, 2));
    *offset = SIZE == 20
                  ? _mm256_permutevar8x32_ps(_mm256_castps128_ps256(dm), _mm256_setr_epi32(1, 1, 1, 1, 3, 3, 3, 3))
                  : _mm256_mul_ps(*scale, _mm256_set1_ps(-8.f));
  }
  // m of both blocks alone, [mA, mB, 0, 0] (Q4_0: -8 d)
  __m128 offsets(int64_t p, int64_t blocks) const {
    return SIZE == 20 ? halves(p, blocks, 2) : _mm_mul_ps(halves(p, blocks, 0), _mm_set1_ps(-8.f));
  }
  // pair p's 64 codes (a missing second block: zeros) as int16, in the order `source` gives
  void codes(int64_t p, int64_t blocks, __m256i* w) const {
    const uint8_t* a = row + 2 * p * SIZE;
    _mm_prefetch(reinterpret_cast<const char*>(a) + PREFETCH, _MM_HINT_T0);
    const __m128i qa = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a + SIZE - 16));
    const __m128i qb = 2 * p + 1 < blocks ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(a + 2 * SIZE - 16))
                                          : _mm_setzero_si128();
    const __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(qa), qb, 1);
    const __m256i nibble = _mm256_set1_epi16(0x000F);
    w[0] = _mm256_and_si256(v, nibble);
    w[1] = _mm256_and_si256(_mm256_srli_epi16(v, 4), nibble);
    w[2] = _mm256_and_si256(_mm256_srli_epi16(v, 8), nibble);
    w[3] = _mm256_srli_epi16(v, 12);
  }
  // the fp16 at byte `at` of both blocks of pair p (a missing second block: 0) as float32, [A, B, 0, 0]
  __m128 halves(int64_t p, int64_t blocks, int at) const {
    const uint8_t* a = row + 2 * p * SIZE + at;
    const uint32_t b = 2 * p + 1 < blocks ? load_u16(a + SIZE) : 0u;
    return _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(load_u16(a) | b << 16)));
  }
  // each lane: 8 products of at most 15 * 32767, exact in int32 and in float
  static __m256i dot(const __m256i* w, const int16_t* xq) { return chain_products(w, xq); }
};
#endif

template <int SIZE, typename T>
void q4_linear_of(const T* x, const uint8_t* raw, T* out, int64_t rows, int64_t n, int64_t k, int threads) {
  const int64_t row_bytes = k / BLOCK * SIZE;
#if MINISGL_INT16_LINEAR
  if constexpr (sizeof(T) == 2) {
    int16_linear(x, out, rows, n, k, threads, [=](int64_t j) { return Q4ColumnI16<SIZE>{raw + j * row_bytes}; });
    return;
  }
#endif
  block_linear(x, out, rows, n, k, threads, [=](int64_t j) { return Q4Column<SIZE>{raw + j * row_bytes}; });
}

// ggml_type: 2 (Q4_0) or 3 (Q4_1), as in the GGUF file
template <typename T>
void q4_linear(const T* x, const uint8_t* raw, T* out, int64_t rows, int64_t n, int64_t k, int ggml_type,
               int threads) {
  if (ggml_type == 3)
    q4_linear_of<20>(x, raw, out, rows, n, k, threads);
  else
    q4_linear_of<18>(x, raw, out, rows, n, k, threads);
}

}  // namespace

#define P(T) (const T* x, const uint8_t* raw, T* out, int64_t rows, int64_t n, int64_t k, int ggml_type, int threads)
EXPORT_BOTH(q4_linear, P(float), P(uint16_t), (x, raw, out, rows, n, k, ggml_type, threads))
#undef P
