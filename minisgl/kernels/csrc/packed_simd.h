// The vector loop of packed_linear.h, one source for two widths: AVX2 (8 columns a vector, ymm) and
// AVX-512 (16, zmm; its VNNI dpwssd makes 32 products an instruction). Each lane is one column and does
// exactly what the plain loop does for it, so both widths give the plain loop's bits.

#pragma once

#include "packed_blocks.h"

#if MINISGL_PACKED_AVX2
namespace minisgl MINISGL_HIDDEN {

// How far ahead of the block being multiplied its bytes are asked for (a software prefetch): the groups
// lie one after another, one stream. 16 KB ahead was what batch-1 products needed to run at memory speed.
constexpr int PREFETCH = 16384;

#if MINISGL_PACKED_AVX512
using VI = __m512i;
using VF = __m512;
inline VI load_i(const uint8_t* p) { return _mm512_loadu_si512(p); }
inline VI widen_i8(const uint8_t* p) {
  return _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
inline VI and_i(VI a, VI b) { return _mm512_and_si512(a, b); }
inline VI shift_i16(VI a, int n) { return _mm512_srli_epi16(a, n); }
inline VI set1_i16(int16_t v) { return _mm512_set1_epi16(v); }
inline VI set1_i32(int32_t v) { return _mm512_set1_epi32(v); }
inline VI zero_i() { return _mm512_setzero_si512(); }
inline VI add_i32(VI a, VI b) { return _mm512_add_epi32(a, b); }
inline VI dot(VI s, VI w, VI x) { return _mm512_dpwssd_epi32(s, w, x); }
constexpr bool FUSED_DOT = true;  // one instruction of several cycles, on the chain through the sum
inline VF halves(const uint8_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
inline VF set1_f(float v) { return _mm512_set1_ps(v); }
inline VF zero_f() { return _mm512_setzero_ps(); }
inline VF to_f(VI a) { return _mm512_cvtepi32_ps(a); }
inline VF mul_f(VF a, VF b) { return _mm512_mul_ps(a, b); }
inline VF add_f(VF a, VF b) { return _mm512_add_ps(a, b); }
inline VF fma_f(VF a, VF b, VF c) { return _mm512_fmadd_ps(a, b, c); }
inline void store_f(float* p, VF a) { _mm512_storeu_ps(p, a); }
#else
using VI = __m256i;
using VF = __m256;
inline VI load_i(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline VI widen_i8(const uint8_t* p) {
  return _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline VI and_i(VI a, VI b) { return _mm256_and_si256(a, b); }
inline VI shift_i16(VI a, int n) { return _mm256_srli_epi16(a, n); }
inline VI set1_i16(int16_t v) { return _mm256_set1_epi16(v); }
inline VI set1_i32(int32_t v) { return _mm256_set1_epi32(v); }
inline VI zero_i() { return _mm256_setzero_si256(); }
inline VI add_i32(VI a, VI b) { return _mm256_add_epi32(a, b); }
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
inline VI dot(VI s, VI w, VI x) { return _mm256_dpwssd_epi32(s, w, x); }
constexpr bool FUSED_DOT = true;
#elif defined(__AVXVNNI__)
inline VI dot(VI s, VI w, VI x) { return _mm256_dpwssd_avx_epi32(s, w, x); }
constexpr bool FUSED_DOT = true;
#else
inline VI dot(VI s, VI w, VI x) { return _mm256_add_epi32(s, _mm256_madd_epi16(w, x)); }
constexpr bool FUSED_DOT = false;  // the madd is off the chain through the sum, which is one add of a cycle
#endif
inline VF halves(const uint8_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline VF set1_f(float v) { return _mm256_set1_ps(v); }
inline VF zero_f() { return _mm256_setzero_ps(); }
inline VF to_f(VI a) { return _mm256_cvtepi32_ps(a); }
inline VF mul_f(VF a, VF b) { return _mm256_mul_ps(a, b); }
inline VF add_f(VF a, VF b) { return _mm256_add_ps(a, b); }
inline VF fma_f(VF a, VF b, VF c) { return _mm256_fmadd_ps(a, b, c); }
inline void store_f(float* p, VF a) { _mm256_storeu_ps(p, a); }
#endif

// four pairs' weights of a block (pairs 4u .. 4u + 3) as int16 vectors, lane 2c + h
template <class Pack>
inline void pairs_of(const uint8_t* blk, int u, VI* w) {
  if constexpr (Pack::OFFSETS) {
    const VI v = load_i(blk + Pack::HEAD + 4 * GROUP * u), nibble = set1_i16(15);
    w[0] = and_i(v, nibble);
    w[1] = and_i(shift_i16(v, 4), nibble);
    w[2] = and_i(shift_i16(v, 8), nibble);
    w[3] = shift_i16(v, 12);
  } else {
    for (int s = 0; s < 4; ++s) w[s] = widen_i8(blk + Pack::HEAD + 2 * GROUP * (4 * u + s));
  }
}

// A row's integer sum goes in CHAINS accumulators (added at the end: integers, so in any order) so that few
// rows still keep several VNNI multiply-adds in flight (AVX2's madd + add needs one: its chain is the add);
// the float part is one multiply-add per row and block.
template <int TILE, class Pack>
inline void tile_simd(const RowsI16& x, int64_t r0, const uint8_t* grp, int64_t blocks, float (*out)[GROUP]) {
  constexpr int CHAINS = !FUSED_DOT || TILE >= 8 ? 1 : (TILE >= 4 ? 2 : (TILE >= 2 ? 4 : 8));
  VF acc[TILE], off[TILE];
  for (int t = 0; t < TILE; ++t) acc[t] = off[t] = zero_f();
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* blk = grp + b * Pack::BYTES;
    for (int l = 0; l < Pack::BYTES; l += 64)
      _mm_prefetch(reinterpret_cast<const char*>(blk) + PREFETCH + l, _MM_HINT_T0);
    VI s[TILE][CHAINS];
    for (int t = 0; t < TILE; ++t)
      for (int c = 0; c < CHAINS; ++c) s[t][c] = zero_i();
    for (int u = 0; u < 4; ++u) {
      VI w[4];
      pairs_of<Pack>(blk, u, w);
      for (int t = 0; t < TILE; ++t) {
        const int16_t* xq = x.q.data() + ((r0 + t) * blocks + b) * BLOCK + 8 * u;
        for (int p = 0; p < 4; ++p) {
          int32_t pair;
          std::memcpy(&pair, xq + 2 * p, 4);
          VI& chain = s[t][(4 * u + p) % CHAINS];
          chain = dot(chain, w[p], set1_i32(pair));
        }
      }
    }
    for (int t = 0; t < TILE; ++t)
      for (int c = 1; c < CHAINS; ++c) s[t][0] = add_i32(s[t][0], s[t][c]);
    const VF d = halves(blk);
    VF m = zero_f();
    if constexpr (Pack::OFFSETS)
      m = Pack::HEAD == 4 * GROUP ? halves(blk + 2 * GROUP) : mul_f(d, set1_f(-8.f));
    for (int t = 0; t < TILE; ++t) {
      const int64_t at = (r0 + t) * blocks + b;
      acc[t] = fma_f(to_f(s[t][0]), mul_f(d, set1_f(x.dx[at])), acc[t]);
      if constexpr (Pack::OFFSETS) off[t] = fma_f(m, set1_f(x.sx[at]), off[t]);
    }
  }
  for (int t = 0; t < TILE; ++t) store_f(out[t], add_f(acc[t], off[t]));
}

}  // namespace minisgl
#endif
