// GGUF's Q8_0 weights multiplied in their own 8 bits (layers/quantization/gguf_q8_0.py is the Python side).
//
//   q8_0_linear         out[r, j] = sum_k x[r, k] * d[j, k / 32] * q[j, k]
//
// The file's blocks: per 32 weights an fp16 scale d then 32 int8 codes q, 34 bytes, where bfloat16 takes
// 64. q8_0_pack repacks them once, at load, into groups of 8 or 16 columns with the same bytes
// (packed_blocks.h); q8_0_linear multiplies the packed groups (packed_linear.h): d * q is exact in float32,
// so the float32 path multiplies by the exact dequantized weight.

#include "packed_linear.h"

using namespace minisgl;

namespace {

template <typename T>
void q8_0_linear(const T* x, const uint8_t* packed, T* out, int64_t rows, int64_t n, int64_t k, int threads) {
  packed_linear<T, Q8Pack>(x, packed, out, rows, n, k, threads);
}

}  // namespace

// raw: the file's rows [n, k / 32 * 34]; packed: ceil(n / GROUP) * (k / 32) * GROUP * 34 bytes
extern "C" void q8_0_pack(const uint8_t* raw, uint8_t* packed, int64_t n, int64_t k) {
  pack_blocks<Q8Pack>(raw, packed, n, k);
}

#define P(T) (const T* x, const uint8_t* packed, T* out, int64_t rows, int64_t n, int64_t k, int threads)
EXPORT_BOTH(q8_0_linear, P(float), P(uint16_t), (x, packed, out, rows, n, k, threads))
#undef P
