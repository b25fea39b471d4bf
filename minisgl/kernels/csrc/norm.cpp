// RMSNorm, bit-identical to torch's F.rms_norm (layers/layernorm.py is the torch code it replaces).
//
//   rms_norm            out = weight * round(x / sqrt(mean(x^2) + eps))  (one row per token; x^2 summed in
//                       torch's order, so bit-identical to F.rms_norm)
//   fused_add_rms_norm  residual = round(x + residual); x = weight * round(norm(residual))   in place

#include <algorithm>
#include <vector>

#include "common.h"

using namespace minisgl;

namespace {

// The sum of x[0..n), added in the order torch's CPU sum adds (ATen's cascade_sum), so it rounds the same:
// W-lane vectors, four in flight (elements i and i + 4W share an accumulator); every 16 rounds of four the
// partial sums move up a level; then the four vectors together, the leftover vectors, and last the
// leftover elements and the W lanes one by one. Rows shorter than W are summed the same way, one lane wide.
// (Not followed: torch splits one row of 32768 elements or more over its threads.)
inline int ceil_log2(int64_t n) { return n <= 2 ? 1 : 64 - __builtin_clzll(static_cast<uint64_t>(n - 1)); }

template <int W>
struct Lanes {  // W floats; a vector_size that depends on W works only inside a class
  typedef float V __attribute__((vector_size(4 * W)));
};

template <int W>
float torch_order_sum(const float* x, int64_t n) {
  typedef typename Lanes<W>::V V;
  auto at = [x](int64_t v) {
    V r;
    std::memcpy(&r, x + v * W, sizeof r);
    return r;
  };
  const int64_t vecs = n / W, groups = vecs / 4;
  const int power = std::max(4, ceil_log2(groups) / 4);
  const int64_t step = int64_t{1} << power;
  V acc[4][4] = {};  // [level][which of the four vectors]
  int64_t i = 0;
  while (i + step <= groups) {
    for (const int64_t end = i + step; i < end; ++i)
      for (int k = 0; k < 4; ++k) acc[0][k] += at(4 * i + k);
    for (int level = 1; level < 4; ++level) {
      for (int k = 0; k < 4; ++k) acc[level][k] += acc[level - 1][k], acc[level - 1][k] = V{};
      if (i & ((step - 1) << (level * power))) break;
    }
  }
  for (; i < groups; ++i)
    for (int k = 0; k < 4; ++k) acc[0][k] += at(4 * i + k);
  for (int level = 1; level < 4; ++level)
    for (int k = 0; k < 4; ++k) acc[0][k] += acc[level][k];
  V p = acc[0][0];
  for (int64_t v = groups * 4; v < vecs; ++v) p += at(v);
  for (int k = 1; k < 4; ++k) p += acc[0][k];
  float sum = 0.f;
  for (int64_t e = vecs * W; e < n; ++e) sum += x[e];
  for (int l = 0; l < W; ++l) sum += p[l];
  return sum;
}

// sum(x^2) as torch's F.rms_norm gets it: each square rounded to float32 first (stored, so the compiler
// cannot fuse it into the add), then summed in torch's order at its vector width, `lanes` (see __init__.py)
template <typename T>
float sum_squares(const T* x, int64_t n, int lanes) {
  static thread_local std::vector<float> squares;
  if (static_cast<int64_t>(squares.size()) < n) squares.resize(n);
  float* sq = squares.data();
  for (int64_t i = 0; i < n; ++i) sq[i] = to_float(x[i]) * to_float(x[i]);
  if (n < lanes) return torch_order_sum<1>(sq, n);
  switch (lanes) {
    case 4: return torch_order_sum<4>(sq, n);
    case 8: return torch_order_sum<8>(sq, n);
    case 16: return torch_order_sum<16>(sq, n);
    case 32: return torch_order_sum<32>(sq, n);
    default: return torch_order_sum<1>(sq, n);
  }
}

// weight * round(x * inv_rms): the rounding to T before the weight multiply is the reference's
template <typename T>
void norm_row(const T* x, const T* weight, T* out, int64_t hidden, float eps, int lanes) {
  const float inv_rms = 1.f / std::sqrt(sum_squares(x, hidden, lanes) / static_cast<float>(hidden) + eps);
  for (int64_t i = 0; i < hidden; ++i) {
    float normed = to_float(from_float<T>(to_float(x[i]) * inv_rms));
    out[i] = from_float<T>(to_float(weight[i]) * normed);
  }
}

template <typename T>
void rms_norm(const T* x, const T* weight, T* out, int64_t rows, int64_t hidden, float eps, int lanes,
              int threads) {
  parallel_for(rows, threads, rows >= 16,
               [=](int64_t r) { norm_row(x + r * hidden, weight, out + r * hidden, hidden, eps, lanes); });
}

template <typename T>
void fused_add_rms_norm(T* x, T* residual, const T* weight, int64_t rows, int64_t hidden, float eps,
                        int lanes, int threads) {
  parallel_for(rows, threads, rows >= 16, [=](int64_t r) {
    T* xr = x + r * hidden;
    T* res = residual + r * hidden;
    for (int64_t i = 0; i < hidden; ++i) res[i] = from_float<T>(to_float(xr[i]) + to_float(res[i]));
    norm_row(res, weight, xr, hidden, eps, lanes);
  });
}

}  // namespace

#define P(T) \
  (const T* x, const T* weight, T* out, int64_t rows, int64_t hidden, float eps, int lanes, int threads)
EXPORT_BOTH(rms_norm, P(float), P(uint16_t), (x, weight, out, rows, hidden, eps, lanes, threads))
#undef P

#define P(T) \
  (T* x, T* residual, const T* weight, int64_t rows, int64_t hidden, float eps, int lanes, int threads)
EXPORT_BOTH(fused_add_rms_norm, P(float), P(uint16_t),
            (x, residual, weight, rows, hidden, eps, lanes, threads))
#undef P
