#version 450
#extension GL_EXT_control_flow_attributes : require
// y[i] = op(x[i]). Defines: T storage type, W compute type, IS_INT (+ IS_SIGNED, BITS) for
// integers, PRECISE (f32 computed in f64 and rounded once) or IS_F64.
// Bindings: 0 x (read), 1 y (write). Push: pc[0] = element count; for a lazy view read through
// strides (ops/elementwise.rs; op code's bit 31 set, so its own pipeline: a run-time branch here
// slowed lavapipe's plain kernels 1.5-2x) pc[1] its rank, dims at pc[4..], strides at pc[10..].
// Specialization: constant 0 = op code (ops/elementwise.rs, UNARY_OPS). Dispatch: ceil(n/256) capped.
#include "common.glsl"
layout(constant_id = 0) const uint OP_BITS = 0;
const uint OP = OP_BITS & 0x7fffffffu;
#if !defined(IS_INT) && (defined(PRECISE) || defined(IS_F64))
// The ops whose routines read exp64's table (exp, sigmoid, sinh, cosh, cbrt, erf, erfc; some
// over part of their range) take it from shared memory on every device (math64.glsl).
#define TABLE_IN_SHARED (SHARED_TABLE || OP == 6u || OP == 13u || OP == 24u || OP == 25u || OP == 29u || OP == 30u || OP == 31u)
#include "math64.glsl"
#define MATH64
#endif
layout(local_size_x_id = 3) in;
const bool STRIDED = (OP_BITS >> 31) != 0u;
layout(constant_id = 2) const uint PER = 1;
layout(set = 0, binding = 0) restrict readonly buffer X { T x[]; };
layout(set = 0, binding = 1) restrict writeonly buffer Y { T y[]; };
#ifdef T4
layout(set = 0, binding = 0) restrict readonly buffer X4 { T4 x4[]; };
layout(set = 0, binding = 1) restrict writeonly buffer Y4 { T4 y4[]; };
#endif

#include "unary_ops.glsl"
#define apply(a) unary_apply(OP, a)

// A function, not a macro around CANONICAL_NAN: that would evaluate apply() twice.
T result(W r) {
#ifdef IS_INT
  return T(r);
#else
  return CANONICAL_NAN(T, r);
#endif
}
#define RESULT(v) result(apply(W(v)))

// Whether unary_apply_short has a short evaluation for the op (it may flag elements). Here, not
// in unary_ops.glsl: the compiler's merged kernels include that file once per compute type, and
// a function without a W parameter would be defined twice there.
bool has_short_path(uint op) {
#if defined(MATH64) && defined(PRECISE)
  return op == 6u || op == 13u;
#else
  return false;
#endif
}

void main() {
  uint n = pc[0];
#ifdef MATH64
  load_math_tables();
#endif
  if (STRIDED) {  // a lazy view (a transpose or broadcast) read in place, element by element
    FOR_EACH_ELEMENT(i, n) y[i] = RESULT(x[strided(i, pc[1], 4u, 10u, 0u)]);
    return;
  }
#ifdef T4
  // Vectors of 4 (common.glsl); the last one may be partial.
  FOR_EACH_ELEMENT(j, (n + 3u) / 4u) {
    if (4u * j + 4u <= n) {
      // Short evaluations first (unary_ops.glsl), the full routine only where one is flagged.
      T4 v = x4[j], r;
      if (has_short_path(OP)) {
        uint flagged = 0u;
        for (int q = 0; q < 4; ++q) {
          bool full;
          r[q] = result(unary_apply_short(OP, W(v[q]), full));
          flagged |= full ? 1u << q : 0u;
        }
        // One copy of the full routine, not four unrolled ones: the rare path's code and
        // registers stay out of the common one.
        [[dont_unroll]] while (flagged != 0u) {
          int q = findLSB(flagged);
          flagged &= flagged - 1u;
          r[q] = RESULT(v[q]);
        }
      } else {
        // (Every other op: the mask loop, though never entered, slowed lavapipe's simple
        // kernels by ~30%.)
        for (int q = 0; q < 4; ++q) r[q] = RESULT(v[q]);
      }
      y4[j] = r;
    } else {
      for (uint i = 4u * j; i < n; ++i) y[i] = RESULT(x[i]);
    }
  }
#else
  FOR_EACH_ELEMENT(i, n) y[i] = RESULT(x[i]);
#endif
}
