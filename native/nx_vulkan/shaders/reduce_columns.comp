#version 450
// Reductions whose outputs lie side by side in memory and whose one reduced dim strides over
// them (sum over axis 0 of a matrix: "column" reductions). reduce.comp gives each output a
// workgroup whose threads read one element a row apart, which coalesces nothing; here a
// workgroup takes 32 neighbouring outputs (x) and 8 lanes of rows (y): each of the 256 threads
// folds every 8th row of one output, so each warp reads 32 adjacent elements per step, then a
// fixed-order tree over the 8 lanes in shared memory. The order depends only on the shape.
// Same defines, specialization, bindings and push constants as reduce.comp (one reduced dim:
// pc[17] its length, pc[23] its stride). Dispatch: ceil(outputs / 32) workgroups (2-D grid).
#include "common.glsl"
layout(local_size_x = 32, local_size_y = 8) in;
layout(constant_id = 0) const uint OP = 0;
layout(set = 0, binding = 0) readonly buffer X { T x[]; };
layout(set = 0, binding = 1) writeonly buffer Y { T y[]; };
shared ACC partial[8][32];

#include "reduce_ops.glsl"

void main() {
  uint n_out = pc[0], n_red = pc[1], kept_rank = pc[2];
  uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
  uint group = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  uint o = group * 32u + tx;
  ACC acc = identity();
  if (o < n_out) {
    int base = int(strided(o, kept_rank, 5, 11, pc[4]));
    int stride = int(pc[23]);
    for (uint r = ty; r < n_red; r += 8u) acc = combine(acc, ACC(x[uint(base + int(r) * stride)]));
  }
  partial[ty][tx] = acc;
  barrier();
  for (uint s = 4u; s > 0u; s >>= 1) {
    if (ty < s) partial[ty][tx] = combine(partial[ty][tx], partial[ty + s][tx]);
    barrier();
  }
  if (ty == 0u && o < n_out) y[o] = T(partial[0][tx]);
}
