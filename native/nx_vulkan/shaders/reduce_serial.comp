#version 450
// Reduction over any set of axes, one invocation per output element folding its reduced elements
// in order (the BinaryBackend's order). For short reductions on any device, and for all
// reductions on CPU devices, where reduce.comp's workgroup barriers cost more than they save.
// Same defines, specialization, bindings and push constants as reduce.comp.
// Dispatch: elementwise grid over the outputs.
#include "common.glsl"
layout(local_size_x_id = 3) in;
layout(constant_id = 0) const uint OP = 0;
layout(set = 0, binding = 0) readonly buffer X { T x[]; };
layout(set = 0, binding = 1) writeonly buffer Y { T y[]; };

#include "reduce_ops.glsl"

void main() {
  uint n_out = pc[0], n_red = pc[1], kept_rank = pc[2], red_rank = pc[3];
  uint o = element_index();
  if (o >= n_out) return;
  uint base = strided(o, kept_rank, 5, 11, pc[4]);
  ACC acc = identity();
  if (red_rank == 1u) {
    // One reduced dim (the common case: Layout merges what it can): its elements are a stride
    // apart, so no index decoding per element, and four loads go out before they are folded,
    // still in order. On GPUs the four loads' latencies overlap instead of adding up (a short
    // serial reduction is a chain of dependent steps); on lavapipe the loop carries its
    // values (stored lane by lane) once per four elements instead of once per element.
    int s = int(pc[23]);
    uint r = 0u;
    for (; r + 4u <= n_red; r += 4u) {
      int i = int(base) + int(r) * s;
      ACC v0 = ACC(x[uint(i)]), v1 = ACC(x[uint(i + s)]), v2 = ACC(x[uint(i + 2 * s)]), v3 = ACC(x[uint(i + 3 * s)]);
      acc = combine(combine(combine(combine(acc, v0), v1), v2), v3);
    }
    for (; r < n_red; ++r) acc = combine(acc, ACC(x[uint(int(base) + int(r) * s)]));
  } else {
    for (uint r = 0; r < n_red; ++r) {
      acc = combine(acc, ACC(x[strided(r, red_rank, 17, 23, base)]));
    }
  }
  y[o] = REDUCED(acc);
}
