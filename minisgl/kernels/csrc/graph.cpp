// A decode step recorded once and replayed in one call: the CPU's counterpart of SGLang's CUDA graphs
// (model_executor/cpu_graph_runner.py is the Python side, kernels/graph.py the recording).
//
// On a CPU with one small model, about a third of a batch-1 decode step went to Python: deciding which
// kernel to call, making tensors and converting arguments. A recorded step is a list of kernel calls with
// every argument fixed (pointers into buffers that stay alive, sizes, thread count); `graph_replay` runs
// that list without going back to Python. The step's inputs (token ids, positions, KV
// slots, ...) are copied into fixed buffers first, as a CUDA graph's static inputs are.
//
// Three small kernels live here too, for the parts of a decode step that were torch ops between kernels:
// writing a row's K or V into the pool (index_copy_), looking up Q8_0 embedding rows, and widening the
// bfloat16 logits to float32.

#include "packed_linear.h"  // the packed Q8_0 table (packed_blocks.h), half_to_float, and common.h

using namespace minisgl;

// The kernels a graph can call: each file's C entry points (EXPORT_BOTH), declared here by signature.
#define P const void*
extern "C" {
void rms_norm_f32(P, P, void*, int64_t, int64_t, float, int, int);
void rms_norm_bf16(P, P, void*, int64_t, int64_t, float, int, int);
void fused_add_rms_norm_f32(void*, void*, P, int64_t, int64_t, float, int, int);
void fused_add_rms_norm_bf16(void*, void*, P, int64_t, int64_t, float, int, int);
void rotary_embedding_f32(P, void*, void*, P, P, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int);
void rotary_embedding_bf16(P, void*, void*, P, P, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int);
void silu_and_mul_f32(P, void*, int64_t, int64_t, int);
void silu_and_mul_bf16(P, void*, int64_t, int64_t, int);
void decode_attention_f32(P, P, P, void*, P, P, P, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                          float, int);
void decode_attention_bf16(P, P, P, void*, P, P, P, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                           float, int);
void q8_0_linear_f32(P, P, void*, int64_t, int64_t, int64_t, int);
void q8_0_linear_bf16(P, P, void*, int64_t, int64_t, int64_t, int);
void q4_linear_f32(P, P, void*, int64_t, int64_t, int64_t, int, int);
void q4_linear_bf16(P, P, void*, int64_t, int64_t, int64_t, int, int);
void kv_write_f32(P, void*, P, int64_t, int64_t, int64_t);
void kv_write_bf16(P, void*, P, int64_t, int64_t, int64_t);
void q8_0_embedding_f32(P, P, void*, int64_t, int64_t);
void q8_0_embedding_bf16(P, P, void*, int64_t, int64_t);
void bf16_to_f32(P, void*, int64_t);
}
#undef P

namespace {

// K or V rows into the pool: row i of src (row_stride elements apart, as a view of the fused qkv output
// is) goes to slot loc[i] of dst, whose rows are `width` elements. What index_copy_ does.
template <typename T>
void kv_write(const T* src, T* dst, const int64_t* loc, int64_t rows, int64_t width, int64_t row_stride) {
  for (int64_t i = 0; i < rows; ++i)
    std::memcpy(dst + loc[i] * width, src + i * row_stride, width * sizeof(T));
}

// Rows ids[i] of a packed Q8_0 table (packed_blocks.h: row i is column i % GROUP of group i / GROUP):
// d * q in float32 (exact), stored in T. Bit for bit what dequantizing the whole table and indexing it gives.
template <typename T>
void q8_0_embedding(const int64_t* ids, const uint8_t* packed, T* out, int64_t rows, int64_t dim) {
  const int64_t blocks = dim / BLOCK;
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* grp = packed + ids[r] / GROUP * blocks * Q8Pack::BYTES;
    const int c = static_cast<int>(ids[r] % GROUP);
    for (int64_t b = 0; b < blocks; ++b) {
      const uint8_t* blk = grp + b * Q8Pack::BYTES;
      const float d = scale_of<Q8Pack>(blk, c);
      for (int i = 0; i < BLOCK; ++i)
        out[r * dim + b * BLOCK + i] = from_float<T>(d * static_cast<float>(Q8Pack::code(blk, c, i)));
    }
  }
}

}  // namespace

extern "C" {
void kv_write_f32(const void* src, void* dst, const void* loc, int64_t rows, int64_t width, int64_t stride) {
  kv_write(static_cast<const float*>(src), static_cast<float*>(dst), static_cast<const int64_t*>(loc), rows,
           width, stride);
}
void kv_write_bf16(const void* src, void* dst, const void* loc, int64_t rows, int64_t width, int64_t stride) {
  kv_write(static_cast<const uint16_t*>(src), static_cast<uint16_t*>(dst), static_cast<const int64_t*>(loc),
           rows, width, stride);
}
void q8_0_embedding_f32(const void* ids, const void* raw, void* out, int64_t rows, int64_t dim) {
  q8_0_embedding(static_cast<const int64_t*>(ids), static_cast<const uint8_t*>(raw), static_cast<float*>(out),
                 rows, dim);
}
void q8_0_embedding_bf16(const void* ids, const void* raw, void* out, int64_t rows, int64_t dim) {
  q8_0_embedding(static_cast<const int64_t*>(ids), static_cast<const uint8_t*>(raw),
                 static_cast<uint16_t*>(out), rows, dim);
}
void bf16_to_f32(const void* in, void* out, int64_t n) {
  const uint16_t* x = static_cast<const uint16_t*>(in);
  float* y = static_cast<float*>(out);
  for (int64_t i = 0; i < n; ++i) y[i] = to_float(x[i]);
}

// One recorded call: which kernel (kernels/graph.py's KERNELS, in this order), its integer and pointer
// arguments in order, and its one float argument if it has one.
struct GraphOp {
  int64_t kernel;
  int64_t a[15];
  float f;
};

#define PTR(i) reinterpret_cast<void*>(op.a[i])
#define INT(i) static_cast<int>(op.a[i])
void graph_replay(const GraphOp* ops, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const GraphOp& op = ops[i];
    switch (op.kernel) {
      case 0: rms_norm_f32(PTR(0), PTR(1), PTR(2), op.a[3], op.a[4], op.f, INT(5), INT(6)); break;
      case 1: rms_norm_bf16(PTR(0), PTR(1), PTR(2), op.a[3], op.a[4], op.f, INT(5), INT(6)); break;
      case 2: fused_add_rms_norm_f32(PTR(0), PTR(1), PTR(2), op.a[3], op.a[4], op.f, INT(5), INT(6)); break;
      case 3: fused_add_rms_norm_bf16(PTR(0), PTR(1), PTR(2), op.a[3], op.a[4], op.f, INT(5), INT(6)); break;
      case 4:
        rotary_embedding_f32(PTR(0), PTR(1), PTR(2), PTR(3), PTR(4), op.a[5], op.a[6], op.a[7], op.a[8],
                             op.a[9], op.a[10], INT(11));
        break;
      case 5:
        rotary_embedding_bf16(PTR(0), PTR(1), PTR(2), PTR(3), PTR(4), op.a[5], op.a[6], op.a[7], op.a[8],
                              op.a[9], op.a[10], INT(11));
        break;
      case 6: silu_and_mul_f32(PTR(0), PTR(1), op.a[2], op.a[3], INT(4)); break;
      case 7: silu_and_mul_bf16(PTR(0), PTR(1), op.a[2], op.a[3], INT(4)); break;
      case 8:
        decode_attention_f32(PTR(0), PTR(1), PTR(2), PTR(3), PTR(4), PTR(5), PTR(6), op.a[7], op.a[8],
                             op.a[9], op.a[10], op.a[11], op.a[12], op.f, INT(13));
        break;
      case 9:
        decode_attention_bf16(PTR(0), PTR(1), PTR(2), PTR(3), PTR(4), PTR(5), PTR(6), op.a[7], op.a[8],
                              op.a[9], op.a[10], op.a[11], op.a[12], op.f, INT(13));
        break;
      case 10: q8_0_linear_f32(PTR(0), PTR(1), PTR(2), op.a[3], op.a[4], op.a[5], INT(6)); break;
      case 11: q8_0_linear_bf16(PTR(0), PTR(1), PTR(2), op.a[3], op.a[4], op.a[5], INT(6)); break;
      case 12: q4_linear_f32(PTR(0), PTR(1), PTR(2), op.a[3], op.a[4], op.a[5], INT(6), INT(7)); break;
      case 13: q4_linear_bf16(PTR(0), PTR(1), PTR(2), op.a[3], op.a[4], op.a[5], INT(6), INT(7)); break;
      case 14: kv_write_f32(PTR(0), PTR(1), PTR(2), op.a[3], op.a[4], op.a[5]); break;
      case 15: kv_write_bf16(PTR(0), PTR(1), PTR(2), op.a[3], op.a[4], op.a[5]); break;
      case 16: q8_0_embedding_f32(PTR(0), PTR(1), PTR(2), op.a[3], op.a[4]); break;
      case 17: q8_0_embedding_bf16(PTR(0), PTR(1), PTR(2), op.a[3], op.a[4]); break;
      case 18: bf16_to_f32(PTR(0), PTR(1), op.a[2]); break;
      default: break;  // graph.py records only the kernels above
    }
  }
}
#undef PTR
#undef INT
}
