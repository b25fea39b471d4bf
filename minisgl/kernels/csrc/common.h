// Shared by every kernel file of minisgl/kernels/csrc. They are built together into one library by
// kernels/build.py (g++ -O3 -march=native -fopenmp) and called through ctypes with raw pointers by
// kernels/__init__.py.
//
// Every kernel computes in float32 and stores in the tensor's dtype: float32, or bfloat16 (kept as
// uint16_t; converted with round-to-nearest-even, as torch does). Sizes and strides come in elements.
// Each kernel is exported twice, as NAME_f32 and NAME_bf16 (EXPORT_BOTH, at the end of each file).

#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

// Only the C entry points leave the library. The C++ names stay inside it (hidden), so builds loaded in one
// process (a test loads the plain and AVX2 builds next to this CPU's) each call their own functions and
// keep their own `thread_local` buffers, and calls between the files do not go through the dynamic linker.
#define MINISGL_HIDDEN __attribute__((visibility("hidden")))

namespace minisgl MINISGL_HIDDEN {

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

// e^x in float32 to about 2 ulp, written so the compiler can vectorize it (a call to expf cannot be,
// unless -ffast-math, which would also loosen every other float operation here; its clamps need
// -fno-trapping-math, kernels/build.py): x = n*ln2 + r with
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

// body(i) for i in [0, n): on `threads` OpenMP threads where `worth` it, else in this thread without
// entering OpenMP at all: a parallel region costs even one thread about 0.6 us (an `if` clause does not
// avoid it), and a batch-1 decode step makes about 250 kernel calls.
template <class Body>
inline void parallel_for(int64_t n, int threads, bool worth, Body body) {
  if (threads > 1 && worth) {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t i = 0; i < n; ++i) body(i);
  } else {
    for (int64_t i = 0; i < n; ++i) body(i);
  }
}

}  // namespace minisgl

// ---- C entry points: one per kernel and dtype (f32, bf16) -------------------------------------------
#define EXPORT_BOTH(NAME, PARAMS_F32, PARAMS_BF16, ARGS)     \
  extern "C" void NAME##_f32 PARAMS_F32 { NAME<float> ARGS; } \
  extern "C" void NAME##_bf16 PARAMS_BF16 { NAME<uint16_t> ARGS; }
