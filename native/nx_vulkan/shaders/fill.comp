#version 450
// y[i] = value for i < n. T is an unsigned storage type of the element's width; the value's bits
// come in pc[1] (low 32) and pc[2] (high 32, for 8-byte elements).
// Bindings: 0 y (write). Push: pc[0] n, pc[1] bits low, pc[2] bits high.
#include "common.glsl"
layout(local_size_x_id = 3) in;
layout(set = 0, binding = 0) writeonly buffer Y { T y[]; };

void main() {
  uint n = pc[0];
#if ELEM_BYTES == 8
  T v = T(pc[1]) | (T(pc[2]) << 32);
#else
  T v = T(pc[1]);
#endif
  uint i = element_index();
  if (i < n) y[i] = v;
}
