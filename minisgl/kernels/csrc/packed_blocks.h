// GGUF's Q4_0, Q4_1 and Q8_0 weights, repacked once at load into groups of GROUP output columns (8, or 16
// where AVX-512 has 16 lanes; pack_blocks, q4_linear.cpp / q8_0_linear.cpp). packed_linear.h multiplies them.
//
// The file stores each output column j as its own row of blocks (32 weights along K each: an fp16 scale d,
// Q4_1's fp16 offset m, then the codes q). A product made lane by lane over K has to add each column's lanes
// up at the end, once per row of x. Packed, the columns of a group sit side by side: one vector lane per
// column, so each lane's sum is that column's result and a row costs one multiply-add per pair of weights.
//
// Per group and per block, in this order (the same bytes per 32 weights as the file):
//   d      GROUP fp16, one per column
//   m      Q4_1 only: GROUP fp16 (Q4_0's weight is q * d + m with m = -8 d)
//   codes  per pair i of weights (2i, 2i + 1) of the block, 2 * GROUP lanes: lane 2c + h holds column c's
//          weight 2i + h. Q8_0: one int8 each (16 pairs of 2 * GROUP bytes). Q4: four pairs share one
//          uint16 lane, pair 4u + s in bits 4s .. 4s + 3 (4 times 2 * GROUP lanes).
// A missing last column of a group (N not a multiple of GROUP) is packed as zeros. The layout lives in memory
// only, so it may differ from one CPU to another; the results do not (packed_linear.h).

#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "common.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define MINISGL_PACKED_AVX2 1
#include <immintrin.h>
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__)
#define MINISGL_PACKED_AVX512 1
#endif
#endif

namespace minisgl MINISGL_HIDDEN {

constexpr int BLOCK = 32;  // weights per block along K
#if MINISGL_PACKED_AVX512
constexpr int GROUP = 16;  // output columns per packed group: one 32-bit lane each of an AVX-512 vector
#else
constexpr int GROUP = 8;  // ... of an AVX2 vector (the plain loop takes any)
#endif

inline uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

template <int SIZE>  // the file's bytes per block: 18 (Q4_0) or 20 (Q4_1)
struct Q4Pack {
  static constexpr int FILE_BYTES = SIZE, HEAD = (SIZE == 20 ? 4 : 2) * GROUP, BYTES = HEAD + 16 * GROUP;
  static constexpr bool OFFSETS = true;  // m * (the block's sum of x) adds to each product
  // the file's code k (0..31) of one block: weight i in the low nibble of byte i, i + 16 in the high one
  static int file_code(const uint8_t* block, int k) {
    const uint8_t byte = block[SIZE - 16 + k % 16];
    return k < 16 ? byte & 15 : byte >> 4;
  }
  static void pack(const uint8_t* const* col, uint8_t* out) {  // col[c]: column c's block, or nullptr
    std::memset(out, 0, BYTES);
    for (int c = 0; c < GROUP; ++c) {
      if (!col[c]) continue;
      std::memcpy(out + 2 * c, col[c], 2);
      if (SIZE == 20) std::memcpy(out + 2 * GROUP + 2 * c, col[c] + 2, 2);
      for (int k = 0; k < BLOCK; ++k) {
        const int i = k / 2, at = HEAD + 2 * (2 * GROUP * (i / 4) + 2 * c + k % 2);
        const uint16_t code = static_cast<uint16_t>(file_code(col[c], k) << (4 * (i % 4)));
        const uint16_t lane = static_cast<uint16_t>(load_u16(out + at) | code);
        std::memcpy(out + at, &lane, 2);
      }
    }
  }
  static int code(const uint8_t* packed, int c, int k) {
    const int i = k / 2;
    return load_u16(packed + HEAD + 2 * (2 * GROUP * (i / 4) + 2 * c + k % 2)) >> (4 * (i % 4)) & 15;
  }
};

struct Q8Pack {
  static constexpr int FILE_BYTES = 34, HEAD = 2 * GROUP, BYTES = HEAD + 32 * GROUP;
  static constexpr bool OFFSETS = false;
  static void pack(const uint8_t* const* col, uint8_t* out) {
    std::memset(out, 0, BYTES);
    for (int c = 0; c < GROUP; ++c) {
      if (!col[c]) continue;
      std::memcpy(out + 2 * c, col[c], 2);
      for (int k = 0; k < BLOCK; ++k) out[HEAD + 2 * GROUP * (k / 2) + 2 * c + k % 2] = col[c][2 + k];
    }
  }
  static int code(const uint8_t* packed, int c, int k) {
    return static_cast<int8_t>(packed[HEAD + 2 * GROUP * (k / 2) + 2 * c + k % 2]);
  }
};

// the raw file rows [n, k / 32 * FILE_BYTES] as packed groups [ceil(n / GROUP), k / 32, BYTES]
template <class Pack>
void pack_blocks(const uint8_t* raw, uint8_t* packed, int64_t n, int64_t k) {
  const int64_t blocks = k / BLOCK, row_bytes = blocks * Pack::FILE_BYTES;
  for (int64_t g = 0; g * GROUP < n; ++g)
    for (int64_t b = 0; b < blocks; ++b) {
      const uint8_t* col[GROUP];
      for (int c = 0; c < GROUP; ++c)
        col[c] = g * GROUP + c < n ? raw + (g * GROUP + c) * row_bytes + b * Pack::FILE_BYTES : nullptr;
      Pack::pack(col, packed + (g * blocks + b) * Pack::BYTES);
    }
}

// x's rows as int16 codes (x's own order), and per row and block the step dx and the float sum sx
struct RowsI16 {
  std::vector<int16_t> q;
  std::vector<float> dx, sx;
  std::vector<float> amax;  // scratch: each block's largest magnitude
};

}  // namespace minisgl
