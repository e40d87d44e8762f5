#version 450
// Index generators, for numeric T. OP 0 (iota): y[i] = (i / inner) % dim (inner = product of the
// dims after the axis; dim = 0 means no axis: y[i] = i). OP 1 (eye): y[i] = row == col over the
// last two dims (inner = columns, dim = rows).
// Bindings: 0 y (write). Push: pc[0] n, pc[1] inner, pc[2] dim.
#include "common.glsl"
layout(local_size_x = WG) in;
layout(constant_id = 0) const uint OP = 0;
layout(set = 0, binding = 0) writeonly buffer Y { T y[]; };

void main() {
  uint n = pc[0], inner = pc[1], dim = pc[2];
  uint i = element_index();
  if (i >= n) return;
  if (OP == 0) {
    y[i] = T(dim == 0 ? i : (i / inner) % dim);
  } else {
    uint col = i % inner;
    uint row = (i / inner) % dim;
    y[i] = T(row == col ? 1 : 0);
  }
}
