// x times packed GGUF blocks (packed_blocks.h): out[r, j] = sum_k x[r, k] * (q[j, k] * d + m), the weights
// never made whole.
//
// bfloat16 x (what the engine runs): the products in integers, as llama.cpp does, but with x kept to 16
// bits, not 8. Each block of 32 values of a row becomes int16 codes xq with one step dx, a power of two:
// x ~ xq * dx, |xq| <= 32767. A bfloat16 value has 8 significant bits, so every value of the block within
// a factor 128 of its largest is exact; the smaller ones are off by at most 2^-16 of the largest (bfloat16
// itself rounds each value to 2^-9 of its own size). Then per row, column and block:
//   S = sum of the 32 products q * xq            exact, in int32 (Q4: below 2^24, so exact as a float too)
//   acc = fma(float(S), d * dx, acc)             d * dx is exact: dx is a power of two
//   off = fma(m, sx, off)                        Q4 only; sx = the block's float sum of x, added in order
// block after block, and the result is acc + off. That order is the definition: the vector loop (8 columns
// a vector, or 16 with AVX-512; a row's pairs of x broadcast, VNNI's dpwssd or madd per pair of weights) and
// the plain loop give the same bits, and a row's result never depends on the other rows in its batch.
//
// float32 x: each weight made float32 (q * d + m in one fused multiply-add, exactly the value gguf's own
// dequantizing gives) and multiplied in float, k after k: a float32 product with the exact weights.

#pragma once

#include <algorithm>

#include "packed_simd.h"

namespace minisgl MINISGL_HIDDEN {

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

// column c's d and m of a packed block (Q4_0: m = -8 d, exact)
template <class Pack>
inline float scale_of(const uint8_t* blk, int c) { return half_to_float(load_u16(blk + 2 * c)); }
template <class Pack>
inline float offset_of(const uint8_t* blk, int c) {
  if (Pack::HEAD == 4 * GROUP) return half_to_float(load_u16(blk + 2 * GROUP + 2 * c));
  return -8.f * scale_of<Pack>(blk, c);
}

#if MINISGL_PACKED_AVX2
inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load8(const uint16_t* p) {  // bfloat16: the top half of a float32
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
#endif

// one block of x: xq = x / dx (exact) to the nearest integer, ties to even, within +-32767
template <typename T>
inline void block_codes(const T* xb, float inv, int16_t* q) {
#if MINISGL_PACKED_AVX2
  const __m256 scale = _mm256_set1_ps(inv), top = _mm256_set1_ps(32767.f), bottom = _mm256_set1_ps(-32767.f);
  for (int l = 0; l < BLOCK; l += 16) {
    __m256i v[2];
    for (int u = 0; u < 2; ++u) {
      const __m256 r = _mm256_round_ps(_mm256_mul_ps(load8(xb + l + 8 * u), scale),
                                       _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      v[u] = _mm256_cvtps_epi32(_mm256_max_ps(_mm256_min_ps(r, top), bottom));
    }
    // packs works per 128-bit half: reorder the 64-bit quarters back to x's order
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packs_epi32(v[0], v[1]), 0xD8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + l), packed);
  }
#else
  for (int i = 0; i < BLOCK; ++i) {
    const float r = std::nearbyint(to_float(xb[i]) * inv);
    q[i] = static_cast<int16_t>(r > 32767.f ? 32767.f : (r < -32767.f ? -32767.f : r));
  }
#endif
}

// per block of x: its sum, added in x's order (the same float on every CPU), and its largest magnitude
template <typename T>
inline void block_stats(const T* x, int64_t n, float* sum, float* amax) {
  for (int64_t rb = 0; rb < n; ++rb) {
    float s = 0.f, a = 0.f;
    for (int i = 0; i < BLOCK; ++i) {
      const float v = to_float(x[rb * BLOCK + i]), m = std::fabs(v);
      s += v;
      a = m > a ? m : a;  // std::fmax's value (a NaN is skipped: it makes the sum NaN), without a call
    }
    sum[rb] = s;
    amax[rb] = a;
  }
}
#if MINISGL_PACKED_AVX2
// bfloat16 x, a block per lane (16 with AVX-512, 8 with AVX2): each lane adds its own block's values in
// order, so every sum is the loop's above. A gather brings one pair of values per block. A NaN may make a
// lane's amax NaN too, where the loop skips it; but then its sum is NaN, which quantize_rows looks at.
template <>
inline void block_stats(const uint16_t* x, int64_t n, float* sum, float* amax) {
#if MINISGL_PACKED_AVX512
  constexpr int LANES = 16;
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i step = _mm512_mullo_epi32(lane, _mm512_set1_epi32(2 * BLOCK));  // bytes from block to block
  const __m512i high = _mm512_set1_epi32(static_cast<int32_t>(0xffff0000u));
  for (int64_t rb = 0; rb < n; rb += LANES) {
    const __mmask16 live = n - rb >= LANES ? 0xffff : static_cast<__mmask16>((1u << (n - rb)) - 1);
    __m512 s = _mm512_setzero_ps(), a = _mm512_setzero_ps();
    for (int i = 0; i < BLOCK; i += 2) {
      const __m512i two =
          _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live, step, x + rb * BLOCK + i, 1);
      const __m512 first = _mm512_castsi512_ps(_mm512_slli_epi32(two, 16));
      const __m512 second = _mm512_castsi512_ps(_mm512_and_si512(two, high));
      s = _mm512_add_ps(_mm512_add_ps(s, first), second);
      a = _mm512_max_ps(_mm512_max_ps(a, _mm512_abs_ps(first)), _mm512_abs_ps(second));
    }
    _mm512_mask_storeu_ps(sum + rb, live, s);
    _mm512_mask_storeu_ps(amax + rb, live, a);
  }
#else
  constexpr int LANES = 8;
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i step = _mm256_slli_epi32(lane, 6);  // 64 bytes from block to block
  const __m256i high = _mm256_set1_epi32(static_cast<int32_t>(0xffff0000u));
  const __m256 magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  for (int64_t rb = 0; rb < n; rb += LANES) {
    const int32_t left = static_cast<int32_t>(std::min<int64_t>(n - rb, LANES));
    const __m256i live = _mm256_cmpgt_epi32(_mm256_set1_epi32(left), lane);
    __m256 s = _mm256_setzero_ps(), a = _mm256_setzero_ps();
    for (int i = 0; i < BLOCK; i += 2) {
      const auto* base = reinterpret_cast<const int*>(x + rb * BLOCK + i);
      const __m256i two = _mm256_mask_i32gather_epi32(_mm256_setzero_si256(), base, step, live, 1);
      const __m256 first = _mm256_castsi256_ps(_mm256_slli_epi32(two, 16));
      const __m256 second = _mm256_castsi256_ps(_mm256_and_si256(two, high));
      s = _mm256_add_ps(_mm256_add_ps(s, first), second);
      a = _mm256_max_ps(_mm256_max_ps(a, _mm256_and_ps(first, magnitude)), _mm256_and_ps(second, magnitude));
    }
    _mm256_maskstore_ps(sum + rb, live, s);
    _mm256_maskstore_ps(amax + rb, live, a);
  }
#endif
}
#endif

// std::frexp's exponent e of a > 0 (2^(e - 1) <= a < 2^e) and std::ldexp(1, e), from the bits where the
// float is normal
inline int exponent_of(float a) {
  uint32_t bits;
  std::memcpy(&bits, &a, 4);
  const int field = static_cast<int>(bits >> 23 & 0xffu);
  if (field == 0 || field == 255) {
    int e;
    std::frexp(a, &e);
    return e;
  }
  return field - 126;
}
inline float power_of_two(int e) {
  if (e < -126 || e > 127) return std::ldexp(1.f, e);
  const uint32_t bits = static_cast<uint32_t>(e + 127) << 23;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

template <typename T>
void quantize_rows(const T* x, int64_t rows, int64_t k, RowsI16& o) {
  const int64_t blocks = k / BLOCK;
  o.q.resize(rows * k);  // a block's codes are written below, or zeroed where it has none
  o.dx.assign(rows * blocks, 0.f);
  o.sx.resize(rows * blocks);
  o.amax.resize(rows * blocks);
  block_stats(x, rows * blocks, o.sx.data(), o.amax.data());  // every block's sum and largest |x|
  for (int64_t rb = 0; rb < rows * blocks; ++rb) {
    const float amax = o.amax[rb];
    const bool not_finite = std::isinf(amax) || std::isnan(o.sx[rb]);
    if (not_finite || amax == 0.f) {  // codes 0
      std::memset(o.q.data() + rb * BLOCK, 0, BLOCK * sizeof(int16_t));
      if (not_finite) o.dx[rb] = NAN;  // an inf or NaN in x: every sum of its row becomes NaN, as in float
      continue;
    }
    const int e = exponent_of(amax);  // amax < 2^e
    o.dx[rb] = power_of_two(e - 15);
    if (15 - e <= 127) {
      block_codes(x + rb * BLOCK, power_of_two(15 - e), o.q.data() + rb * BLOCK);
    } else {  // a block below 2^-113: 2^(15 - e) is past float's range, so x is scaled in two exact steps
      float big[BLOCK];
      for (int i = 0; i < BLOCK; ++i) big[i] = to_float(x[rb * BLOCK + i]) * 0x1p64f;
      block_codes(big, power_of_two(15 - e - 64), o.q.data() + rb * BLOCK);
    }
  }
}

// one group, rows [r0, r0 + TILE): the definition above, in plain C++ (where AVX2 is missing)
template <int TILE, class Pack>
inline void tile_plain(const RowsI16& x, int64_t r0, const uint8_t* grp, int64_t blocks,
                       float (*out)[GROUP]) {
  for (int t = 0; t < TILE; ++t)
    for (int c = 0; c < GROUP; ++c) {
      float acc = 0.f, off = 0.f;
      for (int64_t b = 0; b < blocks; ++b) {
        const uint8_t* blk = grp + b * Pack::BYTES;
        const int16_t* xq = x.q.data() + ((r0 + t) * blocks + b) * BLOCK;
        int32_t s = 0;
        for (int k = 0; k < BLOCK; ++k) s += Pack::code(blk, c, k) * xq[k];
        acc = std::fma(static_cast<float>(s), scale_of<Pack>(blk, c) * x.dx[(r0 + t) * blocks + b], acc);
        if (Pack::OFFSETS) off = std::fma(offset_of<Pack>(blk, c), x.sx[(r0 + t) * blocks + b], off);
      }
      out[t][c] = acc + off;
    }
}

#if MINISGL_PACKED_AVX512
constexpr int TILE_ROWS = 8;  // rows per pass over a group: AVX-512's 32 registers hold 8 rows' sums
#elif MINISGL_PACKED_AVX2
constexpr int TILE_ROWS = FUSED_DOT ? 4 : 6;  // AVX2's 16: 6 rows of one sum each (madd), or 4 of two
#else
constexpr int TILE_ROWS = 4;
#endif

template <int TILE, class Pack>
inline void tile_i16(const RowsI16& x, int64_t r0, const uint8_t* grp, int64_t blocks, float (*out)[GROUP]) {
#if MINISGL_PACKED_AVX2
  tile_simd<TILE, Pack>(x, r0, grp, blocks, out);
#else
  tile_plain<TILE, Pack>(x, r0, grp, blocks, out);
#endif
}

// the tile_i16 of `tile` rows (1 .. TILE_ROWS), chosen at run time
template <int TILE, class Pack>
inline void tile_of(int64_t tile, const RowsI16& x, int64_t r0, const uint8_t* grp, int64_t blocks,
                    float (*out)[GROUP]) {
  if constexpr (TILE < TILE_ROWS) {
    if (tile > TILE) return tile_of<TILE + 1, Pack>(tile, x, r0, grp, blocks, out);
  }
  tile_i16<TILE, Pack>(x, r0, grp, blocks, out);
}

// float32 x: per group, block and row, k after k: acc[c] += x[k] * (q * d + m)
template <class Pack>
inline void group_f32(const float* x, int64_t rows, int64_t k, const uint8_t* grp, float (*out)[GROUP]) {
  for (int64_t r = 0; r < rows; ++r)
    for (int c = 0; c < GROUP; ++c) out[r][c] = 0.f;
  for (int64_t b = 0; b < k / BLOCK; ++b) {
    const uint8_t* blk = grp + b * Pack::BYTES;
    float w[BLOCK][GROUP];
    for (int c = 0; c < GROUP; ++c) {
      const float d = scale_of<Pack>(blk, c), m = Pack::OFFSETS ? offset_of<Pack>(blk, c) : 0.f;
      for (int i = 0; i < BLOCK; ++i)
        w[i][c] = Pack::OFFSETS ? std::fma(static_cast<float>(Pack::code(blk, c, i)), d, m)
                                : d * static_cast<float>(Pack::code(blk, c, i));  // exact
    }
    for (int64_t r = 0; r < rows; ++r)
      for (int i = 0; i < BLOCK; ++i)
        for (int c = 0; c < GROUP; ++c) out[r][c] = std::fma(x[r * k + b * BLOCK + i], w[i][c], out[r][c]);
  }
}

template <typename T, class Pack>
void packed_linear(const T* x, const uint8_t* packed, T* out, int64_t rows, int64_t n, int64_t k,
                   int threads) {
  const int64_t blocks = k / BLOCK, groups = (n + GROUP - 1) / GROUP;
  const bool worth = n * k * rows >= 65536;
  if constexpr (sizeof(T) == 4) {
    parallel_for(groups, threads, worth, [&](int64_t g) {
      std::vector<float> sums(rows * GROUP);
      auto* rows_out = reinterpret_cast<float(*)[GROUP]>(sums.data());
      group_f32<Pack>(x, rows, k, packed + g * blocks * Pack::BYTES, rows_out);
      for (int64_t r = 0; r < rows; ++r)
        for (int c = 0; c < GROUP && g * GROUP + c < n; ++c) out[r * n + g * GROUP + c] = rows_out[r][c];
    });
    return;
  } else {
    static thread_local RowsI16 codes;  // this thread's: the workers below read it through `xq`
    quantize_rows(x, rows, k, codes);
    const RowsI16& xq = codes;
    parallel_for(groups, threads, worth, [&](int64_t g) {
      const uint8_t* grp = packed + g * blocks * Pack::BYTES;
      float sums[TILE_ROWS][GROUP];
      for (int64_t r0 = 0, passes = (rows + TILE_ROWS - 1) / TILE_ROWS; r0 < rows; --passes) {
        const int64_t tile = (rows - r0 + passes - 1) / passes;  // even tiles: 5 rows are one pass
        tile_of<1, Pack>(tile, xq, r0, grp, blocks, sums);
        for (int64_t t = 0; t < tile; ++t)
          for (int c = 0; c < GROUP && g * GROUP + c < n; ++c)
            out[(r0 + t) * n + g * GROUP + c] = from_float<T>(sums[t][c]);
        r0 += tile;
      }
    });
  }
}

}  // namespace minisgl
