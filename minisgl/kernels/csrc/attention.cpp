// Decode attention over the paged KV pool (layers/attention/cpu_paged_backend.py calls it; the torch
// backend's forward_decode is what it replaces).
//
//   decode_attention    one query row per request against its history in the paged KV pool, read
//                       in place through req_to_token: no gather, no padding (a verify forward's rows
//                       of one request share their reads)

#include <vector>

#include "common.h"

using namespace minisgl;

namespace {

// A request's slots are scattered over the pool (each decode round takes one new slot per request), so
// the hardware prefetcher cannot guess the next row: ask for the row kAhead slots on while this one is used.
constexpr int64_t kAhead = 8;
template <typename T>
inline void prefetch_row(const T* row, int64_t n) {
  const char* p = reinterpret_cast<const char*>(row);
  for (int64_t off = 0; off < n * static_cast<int64_t>(sizeof(T)); off += 64) __builtin_prefetch(p + off);
}

// Query rows of one request (all heads) against the K/V rows of its slots, read in the order the request
// holds them: each slot's row (every KV head) is read once, front to back, so the memory streams. Usually one
// row; a speculative verify forward gives a request 1 + K consecutive rows, row r seeing lens[r] slots (one
// more than the row before), and they share each K/V row read. Scores q.k, then each head's softmax, then
// the weighted sum of V, each row's in the same order as if it were alone. Query head h reads KV head
// h / group. D is the head size when it is known at compile time (64, 128: the loops over it unroll into
// registers), or 0 for any other size.
template <typename T, int D>
void attend(const T* q, int64_t q_stride, const T* k_buffer, const T* v_buffer, T* out, const int64_t* slots,
            const int64_t* lens, int64_t rows, int64_t q_heads, int64_t kv_heads, int64_t head_dim_rt,
            float scale, float* qf, float* row, float* acc, float* scores, const int64_t* kv_of) {
  const int64_t head_dim = D ? D : head_dim_rt, kv_row = kv_heads * head_dim, width = q_heads * head_dim;
  const int64_t len = lens[rows - 1];  // the last row sees the most slots
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < width; ++i) qf[r * width + i] = to_float(q[r * q_stride + i]) * scale;
  for (int64_t t = 0; t < len; ++t) {  // K row of slot t, converted once, shared by each group's heads
    if (t + kAhead < len) prefetch_row(k_buffer + slots[t + kAhead] * kv_row, kv_row);
    const T* kt = k_buffer + slots[t] * kv_row;
#pragma omp simd
    for (int64_t i = 0; i < kv_row; ++i) row[i] = to_float(kt[i]);
    for (int64_t r = 0; r < rows; ++r) {
      if (t >= lens[r]) continue;
      for (int64_t h = 0; h < q_heads; ++h) {
        const float* qh = qf + r * width + h * head_dim;
        const float* kh = row + kv_of[h];
        float s = 0.f;
#pragma omp simd reduction(+ : s)
        for (int64_t d = 0; d < head_dim; ++d) s += qh[d] * kh[d];
        scores[(r * q_heads + h) * len + t] = s;
      }
    }
  }
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t h = 0; h < q_heads; ++h) {  // softmax of each head's scores
      float* sh = scores + (r * q_heads + h) * len;
      const int64_t n = lens[r];
      float top = -INFINITY, sum = 0.f;
      for (int64_t t = 0; t < n; ++t) top = sh[t] > top ? sh[t] : top;
#pragma omp simd
      for (int64_t t = 0; t < n; ++t) sh[t] = exp_approx(sh[t] - top);
      for (int64_t t = 0; t < n; ++t) sum += sh[t];  // in order, on every CPU
      for (int64_t t = 0; t < n; ++t) sh[t] /= sum;
    }
  for (int64_t i = 0; i < rows * width; ++i) acc[i] = 0.f;
  for (int64_t t = 0; t < len; ++t) {
    if (t + kAhead < len) prefetch_row(v_buffer + slots[t + kAhead] * kv_row, kv_row);
    const T* vt = v_buffer + slots[t] * kv_row;
#pragma omp simd
    for (int64_t i = 0; i < kv_row; ++i) row[i] = to_float(vt[i]);
    for (int64_t r = 0; r < rows; ++r) {
      if (t >= lens[r]) continue;
      for (int64_t h = 0; h < q_heads; ++h) {
        const float p = scores[(r * q_heads + h) * len + t];
        const float* vh = row + kv_of[h];
        float* a = acc + r * width + h * head_dim;
#pragma omp simd
        for (int64_t d = 0; d < head_dim; ++d) a[d] += p * vh[d];
      }
    }
  }
  for (int64_t i = 0; i < rows * width; ++i) out[i] = from_float<T>(acc[i]);
}

template <typename T>
void decode_attention(const T* q, const T* k_buffer, const T* v_buffer, T* out, const int64_t* req_to_token,
                      const int64_t* req_pool_indices, const int64_t* seq_lens, int64_t batch,
                      int64_t q_heads, int64_t kv_heads, int64_t head_dim, int64_t q_row_stride,
                      int64_t max_context, float scale, int threads) {
  auto* one = head_dim == 64 ? attend<T, 64> : head_dim == 128 ? attend<T, 128> : attend<T, 0>;
  // consecutive rows of one request, each one slot longer than the one before (a verify forward's rows),
  // go together: starts[g] is group g's first row
  std::vector<int64_t> starts;
  for (int64_t b = 0; b < batch; ++b)
    if (b == 0 || req_pool_indices[b] != req_pool_indices[b - 1] || seq_lens[b] != seq_lens[b - 1] + 1)
      starts.push_back(b);
  const int64_t groups = static_cast<int64_t>(starts.size());
  starts.push_back(batch);
  struct Scratch {  // one per thread
    std::vector<float> qf, row, acc, scores;
    std::vector<int64_t> kv_of;  // where query head h's KV head starts in a row: (h / group) * head_dim
  };
  const auto make_scratch = [=]() {
    Scratch s{{}, std::vector<float>(kv_heads * head_dim), {}, {}, std::vector<int64_t>(q_heads)};
    for (int64_t h = 0; h < q_heads; ++h) s.kv_of[h] = h / (q_heads / kv_heads) * head_dim;
    return s;
  };
  const auto group = [&](int64_t g, Scratch& s) {
    const int64_t b = starts[g], rows = starts[g + 1] - b;
    s.qf.resize(rows * q_heads * head_dim);
    s.acc.resize(rows * q_heads * head_dim);
    s.scores.resize(rows * q_heads * seq_lens[b + rows - 1]);
    one(q + b * q_row_stride, q_row_stride, k_buffer, v_buffer, out + b * q_heads * head_dim,
        req_to_token + req_pool_indices[b] * max_context, seq_lens + b, rows, q_heads, kv_heads, head_dim,
        scale, s.qf.data(), s.row.data(), s.acc.data(), s.scores.data(), s.kv_of.data());
  };
  if (threads > 1 && groups > 1) {  // else no OpenMP at all (see parallel_for in common.h)
#pragma omp parallel num_threads(threads)
    {
      Scratch s = make_scratch();
#pragma omp for schedule(dynamic)
      for (int64_t g = 0; g < groups; ++g) group(g, s);
    }
  } else {
    Scratch s = make_scratch();
    for (int64_t g = 0; g < groups; ++g) group(g, s);
  }
}

}  // namespace

#define P(T)                                                                                                \
  (const T* q, const T* k_buffer, const T* v_buffer, T* out, const int64_t* req_to_token,                \
   const int64_t* req_pool_indices, const int64_t* seq_lens, int64_t batch, int64_t q_heads,             \
   int64_t kv_heads, int64_t head_dim, int64_t q_row_stride, int64_t max_context, float scale, int threads)
EXPORT_BOTH(decode_attention, P(float), P(uint16_t),
            (q, k_buffer, v_buffer, out, req_to_token, req_pool_indices, seq_lens, batch, q_heads, kv_heads,
             head_dim, q_row_stride, max_context, scale, threads))
#undef P
