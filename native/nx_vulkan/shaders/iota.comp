#version 450
// Index generators, for numeric T. OP 0 (iota): y[i] = (i / inner) % dim (inner = product of the
// dims after the axis; dim = 0 means no axis: y[i] = i). OP 1 (eye): y[i] = row == col over the
// last two dims (inner = columns, dim = rows).
// Bindings: 0 y (write). Push: pc[0] n, pc[1] inner, pc[2] dim. Define ROUND_BITS (f32: 24, f16:
// 11): the significand bits of T, for indices that T cannot hold exactly (see to_float).
#include "common.glsl"
layout(local_size_x_id = 3) in;
layout(constant_id = 0) const uint OP = 0;
layout(set = 0, binding = 0) writeonly buffer Y { T y[]; };

#ifdef ROUND_BITS
// The index rounded to ROUND_BITS significant bits, to nearest with ties to even, as the
// BinaryBackend writes an integer into T. Done on the integer (the result is a power of two times
// a small integer, so every float step is exact), not by the driver's int-to-float conversion;
// f16 overflows to Inf as the BinaryBackend's f16 does.
T to_float(uint i) {
  int shift = findMSB(i) - (ROUND_BITS - 1);
  if (shift <= 0) return T(float(i));
  uint keep = i >> shift, rest = i & ((1u << shift) - 1u), tie = 1u << (shift - 1);
  if (rest > tie || (rest == tie && (keep & 1u) == 1u)) keep += 1u;
  float value = ldexp(float(keep), shift);
  return (ROUND_BITS == 11 && value > 65504.0) ? T(uintBitsToFloat(0x7f800000u)) : T(value);
}
#define TO_T(i) to_float(i)
#else
#define TO_T(i) T(i)
#endif

void main() {
  uint n = pc[0], inner = pc[1], dim = pc[2];
  uint i = element_index();
  if (i >= n) return;
  if (OP == 0) {
    y[i] = TO_T(dim == 0 ? i : (i / inner) % dim);
  } else {
    uint col = i % inner;
    uint row = (i / inner) % dim;
    y[i] = T(row == col ? 1 : 0);
  }
}
