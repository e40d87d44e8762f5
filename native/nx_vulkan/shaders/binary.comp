#version 450
// c = op(a, b) elementwise with broadcasting through strides (stride 0 on broadcast axes).
// Defines: T storage type; W compute type (int/uint/int64_t/uint64_t for integers, float/double
// for floats); IS_INT (+ IS_SIGNED, BITS) for integer types; PRECISE (f32 computed in f64);
// OUT_U8 for comparisons and logical ops, which write u8.
// Bindings: 0 a (read), 1 b (read), 2 c (write, contiguous).
// Push: pc[0] n, pc[1] rank, pc[2] a offset, pc[3] b offset, pc[4..10] dims, pc[10..16] a strides,
//       pc[16..22] b strides, pc[22] 1 for the vector path (T4 kernels, rank 1, offsets 0,
//       strides 0 or 1; the grid then covers ceil(n / 4) vectors). Specialization: constant 0 = op code (ops/elementwise.rs).
#include "common.glsl"
layout(constant_id = 0) const uint OP = 0;
#if !defined(IS_INT) && (defined(PRECISE) || defined(IS_F64))
// pow reads exp64's table per element: in shared memory on every device (math64.glsl).
#define TABLE_IN_SHARED (SHARED_TABLE || OP == 6u)
#include "math64.glsl"
#endif
layout(local_size_x_id = 3) in;
layout(constant_id = 2) const uint PER = 1;
layout(set = 0, binding = 0) restrict readonly buffer A { T a[]; };
layout(set = 0, binding = 1) restrict readonly buffer B { T b[]; };
#ifdef OUT_U8
layout(set = 0, binding = 2) restrict writeonly buffer C { uint8_t c[]; };
#else
layout(set = 0, binding = 2) restrict writeonly buffer C { T c[]; };
#endif
#ifdef T4
layout(set = 0, binding = 0) restrict readonly buffer A4 { T4 a4[]; };
layout(set = 0, binding = 1) restrict readonly buffer B4 { T4 b4[]; };
layout(set = 0, binding = 2) restrict writeonly buffer C4 { T4 c4[]; };
#endif

#include "binary_ops.glsl"
#define apply(x, y) binary_apply(OP, x, y)

// A function, not a macro around CANONICAL_NAN: that would evaluate apply() twice.
#ifdef OUT_U8
uint8_t result(bool r) { return uint8_t(r ? 1 : 0); }
#elif defined(IS_INT)
T result(W r) { return T(r); }
#else
T result(W r) { return CANONICAL_NAN(T, r); }
#endif
#define RESULT(x, y) result(apply(W(x), W(y)))

void main() {
  uint n = pc[0];
  uint rank = pc[1];
#if !defined(IS_INT) && (defined(PRECISE) || defined(IS_F64))
  load_math_tables();
#endif
#if defined(T4) && !defined(OUT_U8)
  if (pc[22] == 1u) {  // contiguous (or scalar-broadcast) operands, a vector of 4 at a time
    bool a_vec = pc[10] == 1u, b_vec = pc[16] == 1u;
    FOR_EACH_ELEMENT(j, (n + 3u) / 4u) {
      if (4u * j + 4u <= n) {
        T4 x = a_vec ? a4[j] : T4(a[0]), y = b_vec ? b4[j] : T4(b[0]), r;
        for (int q = 0; q < 4; ++q) r[q] = RESULT(x[q], y[q]);
        c4[j] = r;
      } else {
        for (uint i = 4u * j; i < n; ++i) c[i] = RESULT(a[a_vec ? i : 0u], b[b_vec ? i : 0u]);
      }
    }
    return;
  }
#endif
  FOR_EACH_ELEMENT(i, n) {
    int ao = int(pc[2]), bo = int(pc[3]);
    if (rank == 1u) {  // most operands collapse to one dim: no division to decode the index
      ao += int(i) * int(pc[10]);
      bo += int(i) * int(pc[16]);
    } else {
      uint rest = i;
      for (int d = int(rank) - 1; d >= 0; --d) {
        uint dim = pc[4 + d];
        uint q = rest / dim;
        int r = int(rest - q * dim);
        ao += r * int(pc[10 + d]);
        bo += r * int(pc[16 + d]);
        rest = q;
      }
    }
    c[i] = RESULT(a[ao], b[bo]);
  }
}
