// CPU kernels for the engine's hot small ops, one loop nest each. Built at first use by kernels/build.py
// (g++ -O3 -march=native -fopenmp), called through ctypes with raw pointers by kernels/__init__.py.
//
// Every kernel computes in float32 and stores in the tensor's dtype: float32, or bfloat16 (kept as
// uint16_t; converted with round-to-nearest-even, as torch does). Sizes and strides come in elements.
//
//   rms_norm            out = weight * round(x / sqrt(mean(x^2) + eps))  (one row per token; x^2 summed in
//                       torch's order, so bit-identical to F.rms_norm)
//   fused_add_rms_norm  residual = round(x + residual); x = weight * round(norm(residual))   in place
//   rotary_embedding    q and k rotated in place by each row's logical position (neox halves)
//   silu_and_mul        out = silu(gate) * up, from one [T, 2I] gate_up row
//   decode_attention    one query row per request against its history in the paged KV pool, read
//                       in place through req_to_token: no gather, no padding
//   greedy_sample       each logits row's argmax (first on ties) and its log-probability, in two passes

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace {

inline float to_float(float x) { return x; }
inline float to_float(uint16_t x) {
  uint32_t u = static_cast<uint32_t>(x) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

template <typename T> T from_float(float f);
template <> inline float from_float<float>(float f) { return f; }
template <> inline uint16_t from_float<uint16_t>(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;  // round to nearest, ties to even
  return static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? 0x7fc0u : rounded);  // NaN stays NaN
}

// GCC's portable vector types: 16 floats (or 32-bit ints) in one AVX-512 register where the CPU has them,
// in smaller registers otherwise. Comparisons give a lane mask; `mask ? a : b` picks per lane.
typedef float f32x16 __attribute__((vector_size(64)));
typedef int32_t i32x16 __attribute__((vector_size(64)));

inline f32x16 load16(const float* p) {
  f32x16 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// e^x in float32 to about 2 ulp, written so the compiler can vectorize it (a call to expf cannot be,
// unless -ffast-math, which would also loosen every other float operation here): x = n*ln2 + r with
// |r| <= ln2/2, e^r by its Taylor polynomial to r^7, and 2^n put straight into the exponent bits.
// Past 88.7 it overflows to inf, as expf does (silu(-89) is -0 in torch); n = 128 has no exponent
// bits of its own, so that one is 2^127 * 2.
inline float exp_approx(float x) {
  x = x < -87.f ? -87.f : (x > 89.f ? 89.f : x);
  float n = std::nearbyint(x * 1.44269504f);
  float r = x - n * 0.693145752f - n * 1.42860677e-6f;  // ln2 split in two for an exact n*ln2_hi
  float p = 1.f / 5040;
  p = p * r + 1.f / 720;
  p = p * r + 1.f / 120;
  p = p * r + 1.f / 24;
  p = p * r + 1.f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.f;
  p = p * r + 1.f;
  const float top = n > 127.f ? 1.f : 0.f;
  int32_t bits = (static_cast<int32_t>(n - top) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, 4);
  return p * scale * (1.f + top);
}

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
#pragma omp parallel for num_threads(threads) if (rows >= 16)
  for (int64_t r = 0; r < rows; ++r) norm_row(x + r * hidden, weight, out + r * hidden, hidden, eps, lanes);
}

template <typename T>
void fused_add_rms_norm(T* x, T* residual, const T* weight, int64_t rows, int64_t hidden, float eps, int lanes,
                        int threads) {
#pragma omp parallel for num_threads(threads) if (rows >= 16)
  for (int64_t r = 0; r < rows; ++r) {
    T* xr = x + r * hidden;
    T* res = residual + r * hidden;
    for (int64_t i = 0; i < hidden; ++i) res[i] = from_float<T>(to_float(xr[i]) + to_float(res[i]));
    norm_row(res, weight, xr, hidden, eps, lanes);
  }
}

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
#pragma omp parallel for num_threads(threads) if (rows >= 16)
  for (int64_t r = 0; r < rows; ++r) {
    const float* cos = cos_cache + positions[r] * head_dim;
    const float* sin = sin_cache + positions[r] * head_dim;
    for (int64_t h = 0; h < q_heads; ++h) rotate_row(q + r * q_row_stride + h * head_dim, cos, sin, half);
    for (int64_t h = 0; h < k_heads; ++h) rotate_row(k + r * k_row_stride + h * head_dim, cos, sin, half);
  }
}

template <typename T>
void silu_and_mul(const T* gate_up, T* out, int64_t rows, int64_t inter, int threads) {
#pragma omp parallel for num_threads(threads) if (rows >= 4)
  for (int64_t r = 0; r < rows; ++r) {
    const T* gate = gate_up + r * 2 * inter;
    const T* up = gate + inter;
    T* o = out + r * inter;
#pragma omp simd
    for (int64_t i = 0; i < inter; ++i) {
      float g = to_float(gate[i]);
      float silu = to_float(from_float<T>(g / (1.f + exp_approx(-g))));  // rounded like the reference's F.silu
      o[i] = from_float<T>(silu * to_float(up[i]));
    }
  }
}

// A request's slots are scattered over the pool (each decode round takes one new slot per request), so
// the hardware prefetcher cannot guess the next row: ask for the row kAhead slots on while this one is used.
constexpr int64_t kAhead = 8;
template <typename T>
inline void prefetch_row(const T* row, int64_t n) {
  const char* p = reinterpret_cast<const char*>(row);
  for (int64_t off = 0; off < n * static_cast<int64_t>(sizeof(T)); off += 64) __builtin_prefetch(p + off);
}

// One request's query row (all heads) against the K/V rows of its slots, read in the order the request
// holds them: each slot's row (every KV head) is read once, front to back, so the memory streams.
// Scores q.k, then each head's softmax, then the weighted sum of V. Query head h reads KV head h / group.
// D is the head size when it is known at compile time (64, 128: the loops over it unroll into registers),
// or 0 for any other size.
template <typename T, int D>
void attend(const T* q, const T* k_buffer, const T* v_buffer, T* out, const int64_t* slots, int64_t len,
            int64_t q_heads, int64_t kv_heads, int64_t head_dim_rt, float scale, float* qf, float* row, float* acc,
            float* scores, const int64_t* kv_of) {
  const int64_t head_dim = D ? D : head_dim_rt, kv_row = kv_heads * head_dim;
  for (int64_t i = 0; i < q_heads * head_dim; ++i) qf[i] = to_float(q[i]) * scale;
  for (int64_t t = 0; t < len; ++t) {  // K row of slot t, converted once, shared by each group's heads
    if (t + kAhead < len) prefetch_row(k_buffer + slots[t + kAhead] * kv_row, kv_row);
    const T* kt = k_buffer + slots[t] * kv_row;
#pragma omp simd
    for (int64_t i = 0; i < kv_row; ++i) row[i] = to_float(kt[i]);
    for (int64_t h = 0; h < q_heads; ++h) {
      const float* qh = qf + h * head_dim;
      const float* kh = row + kv_of[h];
      float s = 0.f;
#pragma omp simd reduction(+ : s)
      for (int64_t d = 0; d < head_dim; ++d) s += qh[d] * kh[d];
      scores[h * len + t] = s;
    }
  }
  for (int64_t h = 0; h < q_heads; ++h) {  // softmax of each head's scores
    float* sh = scores + h * len;
    float top = -INFINITY, sum = 0.f;
    for (int64_t t = 0; t < len; ++t) top = sh[t] > top ? sh[t] : top;
#pragma omp simd reduction(+ : sum)
    for (int64_t t = 0; t < len; ++t) {
      sh[t] = exp_approx(sh[t] - top);
      sum += sh[t];
    }
    for (int64_t t = 0; t < len; ++t) sh[t] /= sum;
  }
  for (int64_t i = 0; i < q_heads * head_dim; ++i) acc[i] = 0.f;
  for (int64_t t = 0; t < len; ++t) {
    if (t + kAhead < len) prefetch_row(v_buffer + slots[t + kAhead] * kv_row, kv_row);
    const T* vt = v_buffer + slots[t] * kv_row;
#pragma omp simd
    for (int64_t i = 0; i < kv_row; ++i) row[i] = to_float(vt[i]);
    for (int64_t h = 0; h < q_heads; ++h) {
      const float p = scores[h * len + t];
      const float* vh = row + kv_of[h];
      float* a = acc + h * head_dim;
#pragma omp simd
      for (int64_t d = 0; d < head_dim; ++d) a[d] += p * vh[d];
    }
  }
  for (int64_t i = 0; i < q_heads * head_dim; ++i) out[i] = from_float<T>(acc[i]);
}

template <typename T>
void decode_attention(const T* q, const T* k_buffer, const T* v_buffer, T* out, const int64_t* req_to_token,
                      const int64_t* req_pool_indices, const int64_t* seq_lens, int64_t batch, int64_t q_heads,
                      int64_t kv_heads, int64_t head_dim, int64_t q_row_stride, int64_t max_context,
                      float scale, int threads) {
  auto* one = head_dim == 64 ? attend<T, 64> : head_dim == 128 ? attend<T, 128> : attend<T, 0>;
#pragma omp parallel num_threads(threads)
  {
    std::vector<float> qf(q_heads * head_dim), row(kv_heads * head_dim), acc(q_heads * head_dim), scores;
    std::vector<int64_t> kv_of(q_heads);  // where query head h's KV head starts in a row: (h / group) * head_dim
    for (int64_t h = 0; h < q_heads; ++h) kv_of[h] = h / (q_heads / kv_heads) * head_dim;
#pragma omp for schedule(dynamic)
    for (int64_t b = 0; b < batch; ++b) {
      scores.resize(q_heads * seq_lens[b]);
      one(q + b * q_row_stride, k_buffer, v_buffer, out + b * q_heads * head_dim,
          req_to_token + req_pool_indices[b] * max_context, seq_lens[b], q_heads, kv_heads, head_dim, scale,
          qf.data(), row.data(), acc.data(), scores.data(), kv_of.data());
    }
  }
}

// Row r: ids[r] = argmax (the first index of the largest value, as torch's max gives), and its
// log-probability under softmax(row): max - logsumexp(row) = -log(sum(exp(row - max))).
// The argmax keeps 16 running maxima with their indices (one per vector lane, strict > keeps each lane's
// first), then takes the largest, lowest index on ties; the sum is a second, vectorized pass.
void greedy_sample(const float* logits, int64_t* ids, float* logprobs, int64_t rows, int64_t vocab, int threads) {
#pragma omp parallel for num_threads(threads) if (rows >= 2)
  for (int64_t r = 0; r < rows; ++r) {
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
        if (lane_max[l] > top || (lane_max[l] == top && lane_idx[l] < best)) top = lane_max[l], best = lane_idx[l];
    }
    for (int64_t i = body; i < vocab; ++i)
      if (x[i] > top) top = x[i], best = i;
    // a float sum of 49k terms drifts by 1e-5 and its lanes' order follows the CPU; a double sum does not
    double sum = 0.0;
#pragma omp simd reduction(+ : sum)
    for (int64_t i = 0; i < vocab; ++i) sum += static_cast<double>(exp_approx(x[i] - top));
    ids[r] = best;
    logprobs[r] = static_cast<float>(-std::log(sum));
  }
}

}  // namespace

// ---- C entry points: one per kernel and dtype (f32, bf16) -------------------------------------------
#define EXPORT_BOTH(NAME, PARAMS_F32, PARAMS_BF16, ARGS)     \
  extern "C" void NAME##_f32 PARAMS_F32 { NAME<float> ARGS; } \
  extern "C" void NAME##_bf16 PARAMS_BF16 { NAME<uint16_t> ARGS; }

#define P(T) (const T* x, const T* weight, T* out, int64_t rows, int64_t hidden, float eps, int lanes, int threads)
EXPORT_BOTH(rms_norm, P(float), P(uint16_t), (x, weight, out, rows, hidden, eps, lanes, threads))
#undef P

#define P(T) (T* x, T* residual, const T* weight, int64_t rows, int64_t hidden, float eps, int lanes, int threads)
EXPORT_BOTH(fused_add_rms_norm, P(float), P(uint16_t), (x, residual, weight, rows, hidden, eps, lanes, threads))
#undef P

#define P(T)                                                                                              \
  (const int64_t* positions, T* q, T* k, const float* cos_cache, const float* sin_cache, int64_t rows, \
   int64_t q_heads, int64_t k_heads, int64_t head_dim, int64_t q_row_stride, int64_t k_row_stride, int threads)
EXPORT_BOTH(rotary_embedding, P(float), P(uint16_t),
            (positions, q, k, cos_cache, sin_cache, rows, q_heads, k_heads, head_dim, q_row_stride, k_row_stride,
             threads))
#undef P

#define P(T) (const T* gate_up, T* out, int64_t rows, int64_t inter, int threads)
EXPORT_BOTH(silu_and_mul, P(float), P(uint16_t), (gate_up, out, rows, inter, threads))
#undef P

#define P(T)                                                                                                \
  (const T* q, const T* k_buffer, const T* v_buffer, T* out, const int64_t* req_to_token,                \
   const int64_t* req_pool_indices, const int64_t* seq_lens, int64_t batch, int64_t q_heads, int64_t kv_heads, \
   int64_t head_dim, int64_t q_row_stride, int64_t max_context, float scale, int threads)
EXPORT_BOTH(decode_attention, P(float), P(uint16_t),
            (q, k_buffer, v_buffer, out, req_to_token, req_pool_indices, seq_lens, batch, q_heads, kv_heads,
             head_dim, q_row_stride, max_context, scale, threads))
#undef P

extern "C" void greedy_sample_f32(const float* logits, int64_t* ids, float* logprobs, int64_t rows, int64_t vocab,
                                  int threads) {
  greedy_sample(logits, ids, logprobs, rows, vocab, threads);
}
