// Packed GGUF blocks (packed_blocks.h) made whole again, a slice of output columns at a time, as bfloat16:
// the weights `--quantization none` multiplies with, bit for bit.
//
//   dequant_bf16      w[j - n0, k] = bf16(q[j, k] * d + m)   for columns j in [n0, n1)
//
// Above a few rows, a matrix product is no longer bound by reading the weights: oneDNN's bfloat16 GEMM (on
// AMX tiles where the CPU has them) then beats the integer kernel, which multiplies every row against every
// weight in VNNI instructions. kernels/dequant_gemm.py dequantizes a layer's blocks into one reused scratch
// buffer and hands it to F.linear from the row count where that is faster.
//
// The value of each weight is the one gguf's own dequantizing gives in float32 (Q4_0: (q - 8) * d, exact,
// its zeros signed as d; Q4_1: q * d + m, one rounding; Q8_0: q * d, exact), rounded to the nearest
// bfloat16, ties to even, as torch's `.to(torch.bfloat16)` does.

#include "packed_linear.h"

using namespace minisgl;

namespace {

// Q4_0 keeps no offset: its weight is (q - 8) * d, whose zero has d's sign, as gguf's
template <class Pack>
constexpr bool Q4_0_PACK = Pack::OFFSETS && Pack::HEAD == 2 * GROUP;

// one column's 32 weights of one block, in k's order, the portable way
template <class Pack>
inline void column_block(const uint8_t* blk, int c, uint16_t* out) {
  const float d = scale_of<Pack>(blk, c), m = Pack::OFFSETS ? offset_of<Pack>(blk, c) : 0.f;
  for (int k = 0; k < BLOCK; ++k) {
    const float q = static_cast<float>(Pack::code(blk, c, k));
    const float w = Q4_0_PACK<Pack> ? (q - 8.f) * d : (Pack::OFFSETS ? std::fma(q, d, m) : q * d);
    out[k] = from_float<uint16_t>(w);
  }
}

#if MINISGL_PACKED_AVX512
// float32 to bfloat16, round to nearest, ties to even (from_float's rule; a NaN stays a NaN)
inline __m256i to_bf16(__m512 v) {
  const __m512i u = _mm512_castps_si512(v), one = _mm512_set1_epi32(1);
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), one);
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), odd), 16);
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                                _mm512_set1_epi32(0x7f800000));
  r = _mm512_mask_mov_epi32(r, nan, _mm512_set1_epi32(0x7fc0));
  return _mm512_cvtepi32_epi16(r);
}

// Q4: column c's 8 uint16 lanes (packed_blocks.h) are dword c of each of the 4 rows of 2 * GROUP lanes.
// Byte p of row u holds the codes of k = 8u + {0, 2 | 4, 6 | 1, 3 | 5, 7}[p] (low nibble, then high).
// Widened to 16 low nibbles then 16 high ones, KORDER picks them in k's order; the codes then pick from
// the column's table of its 16 possible weights (vpermw twice).
template <class Pack>
inline void column_block_q4(const uint8_t* blk, int c, float d, float m, uint16_t* out) {
  // word j of `both` below: the low nibble of byte j (j < 16) or the high nibble of byte j - 16; byte j is
  // byte j % 4 of row j / 4. k = 8u + 2s + h sits in row u, lane half h, nibble s: byte 2h + s / 2.
  alignas(64) static const int16_t KORDER[32] = {0, 2, 16, 18, 1, 3, 17, 19, 4, 6, 20, 22, 5, 7, 21, 23, 8,
                                                 10, 24, 26, 9, 11, 25, 27, 12, 14, 28, 30, 13, 15, 29, 31};
  const __m128i bytes = _mm_i32gather_epi32(reinterpret_cast<const int*>(blk + Pack::HEAD + 4 * c),
                                            _mm_setr_epi32(0, 4 * GROUP, 8 * GROUP, 12 * GROUP), 1);
  const __m256i wide = _mm256_cvtepu8_epi16(bytes);
  const __m256i low = _mm256_and_si256(wide, _mm256_set1_epi16(15));
  const __m512i both = _mm512_inserti64x4(_mm512_castsi256_si512(low), _mm256_srli_epi16(wide, 4), 1);
  const __m512i codes = _mm512_permutexvar_epi16(_mm512_load_si512(KORDER), both);
  const __m512 q = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512 dv = _mm512_set1_ps(d);  // the weight of each code:
  const __m512 weights = Q4_0_PACK<Pack> ? _mm512_mul_ps(_mm512_sub_ps(q, _mm512_set1_ps(8.f)), dv)
                                         : _mm512_fmadd_ps(q, dv, _mm512_set1_ps(m));
  const __m512i table = _mm512_castsi256_si512(to_bf16(weights));
  _mm512_storeu_si512(out, _mm512_permutexvar_epi16(codes, table));
}

// Q8_0: column c's codes of pair i are the 2 bytes at 2 * GROUP * i + 2 c, gathered as the top half of the
// 4 bytes that end there (the block's last 4 bytes do not lie past it)
inline void column_block_q8(const uint8_t* blk, int c, float d, uint16_t* out) {
  const __m512i lanes = _mm512_i32gather_epi32(
      _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                         _mm512_set1_epi32(2 * GROUP)),
      blk + Q8Pack::HEAD + 2 * c - 2, 1);
  const __m256i codes = _mm512_cvtepi32_epi16(_mm512_srli_epi32(lanes, 16));  // 32 int8, k's order
  const __m512 dv = _mm512_set1_ps(d);
  const __m512i first = _mm512_cvtepi8_epi32(_mm256_castsi256_si128(codes));
  const __m512i second = _mm512_cvtepi8_epi32(_mm256_extracti128_si256(codes, 1));
  auto* dst = reinterpret_cast<__m256i*>(out);
  _mm256_storeu_si256(dst, to_bf16(_mm512_mul_ps(_mm512_cvtepi32_ps(first), dv)));
  _mm256_storeu_si256(dst + 1, to_bf16(_mm512_mul_ps(_mm512_cvtepi32_ps(second), dv)));
}
#endif

template <class Pack>
void dequant(const uint8_t* packed, uint16_t* out, int64_t n0, int64_t n1, int64_t k, int threads) {
  const int64_t blocks = k / BLOCK, g0 = n0 / GROUP, g1 = (n1 + GROUP - 1) / GROUP;
  parallel_for(g1 - g0, threads, (n1 - n0) * k >= 65536, [&](int64_t i) {
    const int64_t g = g0 + i;
    for (int64_t b = 0; b < blocks; ++b) {
      const uint8_t* blk = packed + (g * blocks + b) * Pack::BYTES;
      for (int c = 0; c < GROUP; ++c) {
        const int64_t j = g * GROUP + c;
        if (j < n0 || j >= n1) continue;
        uint16_t* dst = out + (j - n0) * k + b * BLOCK;
#if MINISGL_PACKED_AVX512
        if constexpr (Pack::OFFSETS)
          column_block_q4<Pack>(blk, c, scale_of<Pack>(blk, c), offset_of<Pack>(blk, c), dst);
        else
          column_block_q8(blk, c, scale_of<Pack>(blk, c), dst);
#else
        column_block<Pack>(blk, c, dst);
#endif
      }
    }
  });
}

}  // namespace

// out: bfloat16 [n1 - n0, k], columns n0 .. n1 - 1 of W; ggml_type 2 (Q4_0), 3 (Q4_1) or 8 (Q8_0)
extern "C" void dequant_bf16(const uint8_t* packed, uint16_t* out, int64_t n0, int64_t n1, int64_t k,
                             int ggml_type, int threads) {
  if (ggml_type == 8)
    dequant<Q8Pack>(packed, out, n0, n1, k, threads);
  else if (ggml_type == 3)
    dequant<Q4Pack<20>>(packed, out, n0, n1, k, threads);
  else
    dequant<Q4Pack<18>>(packed, out, n0, n1, k, threads);
}
