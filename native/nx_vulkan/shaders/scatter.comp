#version 450
// indexed_put (OP 0) and indexed_add (OP 1), deterministically: one invocation per output
// element scans the index tuples in order and applies every update aimed at it (put: the last
// wins; add: summed in order, in W). Index tuples outside the target are skipped (the
// BinaryBackend raises). Defines: T element, W compute type (f64 for precise f32).
// Bindings: 0 target (read), 1 indices (read, s64, [B, k]), 2 updates (read, [B, rest]),
//           3 out (write). Push: pc[0] outputs, pc[1] B, pc[2] k, pc[3] rest count, pc[4] rank,
//           pc[5..11] target dims, pc[11..17] indexed axes in tuple order, pc[17] axes bit mask.
#include "common.glsl"
layout(local_size_x_id = 3) in;
layout(constant_id = 0) const uint OP = 0;
layout(set = 0, binding = 0) readonly buffer X { T x[]; };
layout(set = 0, binding = 1) readonly buffer I { int64_t idx[]; };
layout(set = 0, binding = 2) readonly buffer U { T upd[]; };
layout(set = 0, binding = 3) writeonly buffer O { T o[]; };

void main() {
  uint n = pc[0], tuples = pc[1], k = pc[2], rest_count = pc[3], rank = pc[4], mask = pc[17];
  uint e = element_index();
  if (e >= n) return;
  // Target coordinates of e, and its linear index among the dims that are not indexed.
  uint coord[6];
  uint rest = e;
  for (int d = int(rank) - 1; d >= 0; --d) {
    uint dim = pc[5 + d];
    uint q = rest / dim;
    coord[d] = rest - q * dim;
    rest = q;
  }
  uint r = 0;
  for (uint d = 0; d < rank; ++d) {
    if ((mask & (1u << d)) == 0u) r = r * pc[5 + d] + coord[d];
  }
  W acc = W(x[e]);
  for (uint b = 0; b < tuples; ++b) {
    bool hit = true;
    for (uint j = 0; j < k; ++j) {
      hit = hit && idx[b * k + j] == int64_t(coord[pc[11 + j]]);
    }
    if (hit) {
      W u = W(upd[b * rest_count + r]);
      acc = OP == 0u ? u : acc + u;
    }
  }
  o[e] = T(acc);
}
