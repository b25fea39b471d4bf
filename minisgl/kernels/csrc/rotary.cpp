// Rotary position embedding (layers/rotary_embedding.py is the torch code it replaces).
//
//   rotary_embedding    q and k rotated in place by each row's logical position (neox halves)

#include "common.h"

using namespace minisgl;

namespace {

// x rounded to T and back: where the reference computes in T, each of its steps rounds like this
template <typename T>
inline float round_to(float x) {
  return to_float(from_float<T>(x));
}

// x[:half] and x[half:] are the two halves rotated together (the Llama / neox layout). Computed as the
// reference does it in the model's dtype: cos and sin rounded to T, each product rounded, then the sum
// (so no multiply-add fusing here, which would skip a rounding): bit-identical to the torch code.
template <typename T>
__attribute__((optimize("fp-contract=off"))) void rotate_row(T* x, const float* cos, const float* sin,
                                                             int64_t half) {
  for (int64_t i = 0; i < half; ++i) {
    const float a = to_float(x[i]), b = to_float(x[i + half]);
    const float c1 = round_to<T>(cos[i]), s1 = round_to<T>(sin[i]);
    const float c2 = round_to<T>(cos[i + half]), s2 = round_to<T>(sin[i + half]);
    x[i] = from_float<T>(round_to<T>(a * c1) - round_to<T>(b * s1));
    x[i + half] = from_float<T>(round_to<T>(b * c2) + round_to<T>(a * s2));
  }
}

template <typename T>
void rotary_embedding(const int64_t* positions, T* q, T* k, const float* cos_cache, const float* sin_cache,
                      int64_t rows, int64_t q_heads, int64_t k_heads, int64_t head_dim, int64_t q_row_stride,
                      int64_t k_row_stride, int threads) {
  const int64_t half = head_dim / 2;
  parallel_for(rows, threads, rows >= 16, [=](int64_t r) {
    const float* cos = cos_cache + positions[r] * head_dim;
    const float* sin = sin_cache + positions[r] * head_dim;
    for (int64_t h = 0; h < q_heads; ++h) rotate_row(q + r * q_row_stride + h * head_dim, cos, sin, half);
    for (int64_t h = 0; h < k_heads; ++h) rotate_row(k + r * k_row_stride + h * head_dim, cos, sin, half);
  });
}

}  // namespace

#define P(T)                                                                                              \
  (const int64_t* positions, T* q, T* k, const float* cos_cache, const float* sin_cache, int64_t rows, \
   int64_t q_heads, int64_t k_heads, int64_t head_dim, int64_t q_row_stride, int64_t k_row_stride,       \
   int threads)
EXPORT_BOTH(rotary_embedding, P(float), P(uint16_t),
            (positions, q, k, cos_cache, sin_cache, rows, q_heads, k_heads, head_dim, q_row_stride,
             k_row_stride, threads))
#undef P
