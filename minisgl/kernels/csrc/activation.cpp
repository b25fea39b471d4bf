// SwiGLU's gate (layers/activation.py is the torch code it replaces).
//
//   silu_and_mul        out = silu(gate) * up, from one [T, 2I] gate_up row

#include "common.h"

using namespace minisgl;

namespace {

template <typename T>
void silu_and_mul(const T* gate_up, T* out, int64_t rows, int64_t inter, int threads) {
  parallel_for(rows, threads, rows >= 4, [=](int64_t r) {
    const T* gate = gate_up + r * 2 * inter;
    const T* up = gate + inter;
    T* o = out + r * inter;
#pragma omp simd
    for (int64_t i = 0; i < inter; ++i) {
      float g = to_float(gate[i]);
      // rounded like the reference's F.silu
      float silu = to_float(from_float<T>(g / (1.f + exp_approx(-g))));
      o[i] = from_float<T>(silu * to_float(up[i]));
    }
  });
}

}  // namespace

#define P(T) (const T* gate_up, T* out, int64_t rows, int64_t inter, int threads)
EXPORT_BOTH(silu_and_mul, P(float), P(uint16_t), (gate_up, out, rows, inter, threads))
#undef P
