#version 450
// out = pred != 0 ? on_true : on_false, all three broadcast through strides. pred is u8; values T
// (any dtype: T is a storage type of the element's width, so no arithmetic happens here).
// Bindings: 0 pred (read), 1 on_true (read), 2 on_false (read), 3 out (write).
// Push: pc[0] n, pc[1] rank, pc[2..5] offsets (pred, true, false), pc[5..11] dims,
//       pc[11..17] pred strides, pc[17..23] true strides, pc[23..29] false strides.
#include "common.glsl"
layout(local_size_x_id = 3) in;
layout(set = 0, binding = 0) readonly buffer P { uint8_t p[]; };
layout(set = 0, binding = 1) readonly buffer TV { T tv[]; };
layout(set = 0, binding = 2) readonly buffer FV { T fv[]; };
layout(set = 0, binding = 3) writeonly buffer O { T o[]; };

void main() {
  uint n = pc[0];
  uint rank = pc[1];
  uint i = element_index();
  if (i >= n) return;
  int po = int(pc[2]), to = int(pc[3]), fo = int(pc[4]);
  uint rest = i;
  for (int d = int(rank) - 1; d >= 0; --d) {
    uint dim = pc[5 + d];
    uint q = rest / dim;
    int r = int(rest - q * dim);
    po += r * int(pc[11 + d]);
    to += r * int(pc[17 + d]);
    fo += r * int(pc[23 + d]);
    rest = q;
  }
  o[i] = p[po] != uint8_t(0) ? tv[to] : fv[fo];
}
