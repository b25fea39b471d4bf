// GGUF's Q4_0 and Q4_1 weights multiplied in their own 4 bits (layers/quantization/gguf_q4.py is the
// Python side).
//
//   q4_linear         out[r, j] = sum_k x[r, k] * (q[j, k] * d[j, k / 32] + m[j, k / 32])
//
// The file's blocks: per 32 weights an fp16 scale d, for Q4_1 an fp16 offset m (Q4_0 has m = -8 d), then
// 16 bytes of 4-bit codes q in 0..15 (weight i in the low nibble of byte i, weight i + 16 in the high
// nibble): 18 or 20 bytes per 32 weights, where bfloat16 takes 64. q4_pack repacks them once, at load, into
// groups of 8 or 16 columns with the same bytes (packed_blocks.h); q4_linear multiplies the packed groups
// (packed_linear.h). Batch-1 decode reads every weight once per token, as one stream of bytes.

#include "packed_linear.h"

using namespace minisgl;

namespace {

// ggml_type: 2 (Q4_0) or 3 (Q4_1), as in the GGUF file
template <typename T>
void q4_linear(const T* x, const uint8_t* packed, T* out, int64_t rows, int64_t n, int64_t k, int ggml_type,
               int threads) {
  if (ggml_type == 3)
    packed_linear<T, Q4Pack<20>>(x, packed, out, rows, n, k, threads);
  else
    packed_linear<T, Q4Pack<18>>(x, packed, out, rows, n, k, threads);
}

}  // namespace

// columns per packed group on this CPU (8, or 16 with AVX-512): kernels/__init__.py sizes the packed buffers
extern "C" int packed_group() { return GROUP; }

// the vector loop this build runs (the benchmarks print it beside their figures)
extern "C" const char* packed_loop() {
#if MINISGL_PACKED_AVX512
  return "AVX-512 VNNI (dpwssd), 16 columns a group";
#elif MINISGL_PACKED_AVX2
  return FUSED_DOT ? "AVX2 with VNNI (dpwssd), 8 columns a group" : "AVX2 (madd + add), 8 columns a group";
#else
  return "plain C++ loop (no AVX2), 8 columns a group";
#endif
}

// raw: the file's rows [n, k / 32 * 18 or 20]; packed: ceil(n / GROUP) * (k / 32) * GROUP * 18 or 20 bytes
extern "C" void q4_pack(const uint8_t* raw, uint8_t* packed, int64_t n, int64_t k, int ggml_type) {
  if (ggml_type == 3)
    pack_blocks<Q4Pack<20>>(raw, packed, n, k);
  else
    pack_blocks<Q4Pack<18>>(raw, packed, n, k);
}

// bfloat16 x's codes, steps and sums as the products make them (quantize_rows): for the tests, which compare
// this CPU's build with the plain and AVX2 ones; q [rows, k], dx and sx [rows, k / 32]
extern "C" void quantize_x_bf16(const uint16_t* x, int64_t rows, int64_t k, int16_t* q, float* dx,
                                float* sx) {
  RowsI16 codes;
  quantize_rows(x, rows, k, codes);
  std::memcpy(q, codes.q.data(), codes.q.size() * sizeof(int16_t));
  std::memcpy(dx, codes.dx.data(), codes.dx.size() * sizeof(float));
  std::memcpy(sx, codes.sx.data(), codes.sx.size() * sizeof(float));
}

#define P(T) \
  (const T* x, const uint8_t* packed, T* out, int64_t rows, int64_t n, int64_t k, int ggml_type, int threads)
EXPORT_BOTH(q4_linear, P(float), P(uint16_t), (x, packed, out, rows, n, k, ggml_type, threads))
#undef P
