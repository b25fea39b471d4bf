// Greedy sampling (layers/sampler.py's forward_cpu calls it for an all-greedy batch).
//
//   greedy_sample       each logits row's argmax (first on ties) and its log-probability, in two passes

#include "common.h"

using namespace minisgl;

namespace {

// GCC's portable vector types: 16 floats (or 32-bit ints) in one AVX-512 register where the CPU has them,
// in smaller registers otherwise. Comparisons give a lane mask; `mask ? a : b` picks per lane.
typedef float f32x16 __attribute__((vector_size(64)));
typedef int32_t i32x16 __attribute__((vector_size(64)));

inline f32x16 load16(const float* p) {
  f32x16 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Row r: ids[r] = argmax (the first index of the largest value, as torch's max gives), and its
// log-probability under softmax(row): max - logsumexp(row) = -log(sum(exp(row - max))).
// The argmax keeps 16 running maxima with their indices (one per vector lane, strict > keeps each lane's
// first), then takes the largest, lowest index on ties; the sum is a second, vectorized pass.
void greedy_sample(const float* logits, int64_t* ids, float* logprobs, int64_t rows, int64_t vocab,
                   int threads) {
  parallel_for(rows, threads, rows >= 2, [=](int64_t r) {
    const float* x = logits + r * vocab;
    const int64_t body = vocab / 16 * 16;
    float top = -INFINITY;
    int64_t best = 0;
    if (body > 0) {
      f32x16 lane_max = load16(x);
      i32x16 lane_idx = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, idx = lane_idx;
      for (int64_t i = 16; i < body; i += 16) {
        idx += 16;
        const f32x16 v = load16(x + i);
        const i32x16 more = v > lane_max;
        lane_max = more ? v : lane_max;
        lane_idx = more ? idx : lane_idx;
      }
      top = lane_max[0], best = lane_idx[0];
      for (int l = 1; l < 16; ++l)
        if (lane_max[l] > top || (lane_max[l] == top && lane_idx[l] < best))
          top = lane_max[l], best = lane_idx[l];
    }
    for (int64_t i = body; i < vocab; ++i)
      if (x[i] > top) top = x[i], best = i;
    // a float sum of 49k terms drifts by 1e-5 and its lanes' order follows the CPU; a double sum does not
    double sum = 0.0;
#pragma omp simd reduction(+ : sum)
    for (int64_t i = 0; i < vocab; ++i) sum += static_cast<double>(exp_approx(x[i] - top));
    ids[r] = best;
    logprobs[r] = static_cast<float>(-std::log(sum));
  });
}

}  // namespace

extern "C" void greedy_sample_f32(const float* logits, int64_t* ids, float* logprobs, int64_t rows,
                                  int64_t vocab, int threads) {
  greedy_sample(logits, ids, logprobs, rows, vocab, threads);
}
