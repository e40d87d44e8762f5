#version 450
// Reductions whose outputs lie side by side in memory and whose one reduced dim strides over
// them (sum over axis 0 of a matrix: "column" reductions). reduce.comp gives each output a
// workgroup whose threads read one element a row apart, which coalesces nothing; here a
// workgroup takes 32 neighbouring outputs (x) and 8 lanes of rows (y): each of the 256 threads
// folds every 8th row of one output, so each warp reads 32 adjacent elements per step, then a
// fixed-order tree over the 8 lanes in shared memory. The order depends only on the shape.
// Long columns split in two passes (ops/reduce.rs): workgroup z of the first folds rows
// [z pc[29], (z + 1) pc[29]) into partials laid out as a matrix of z rows (OUT_ACC: in the
// accumulator type), and the second folds that matrix's columns (IN_ACC).
// Same defines, specialization and bindings as reduce.comp; push constants too (one reduced dim:
// pc[17] its length, pc[23] its stride), with pc[29] the rows per chunk (0: all).
// Dispatch: ceil(outputs / 32) workgroups (2-D grid) x chunks.
#include "common.glsl"
layout(local_size_x = 32, local_size_y = 8) in;
layout(constant_id = 0) const uint OP = 0;
#ifdef IN_ACC
layout(set = 0, binding = 0) restrict readonly buffer X { ACC x[]; };
#else
layout(set = 0, binding = 0) restrict readonly buffer X { T x[]; };
#endif
#ifdef OUT_ACC
layout(set = 0, binding = 1) restrict writeonly buffer Y { ACC y[]; };
#define STORE(v) (v)
#else
layout(set = 0, binding = 1) restrict writeonly buffer Y { T y[]; };
#define STORE(v) REDUCED(v)
#endif
shared ACC partial[8][32];

#include "reduce_ops.glsl"

void main() {
  uint n_out = pc[0], n_red = pc[1], kept_rank = pc[2];
  uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
  uint group = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  uint o = group * 32u + tx;
  uint begin = 0u, end = n_red;
  if (pc[29] != 0u) {
    begin = gl_WorkGroupID.z * pc[29];
    end = min(n_red, begin + pc[29]);
  }
  ACC acc = identity();
  if (o < n_out) {
    int base = int(strided(o, kept_rank, 5, 11, pc[4]));
    int stride = int(pc[23]);
    uint r = begin + ty;
    // Four rows' loads in flight before their four combines, in row order.
    for (; r + 24u < end; r += 32u) {
      ACC a0 = ACC(x[uint(base + int(r) * stride)]);
      ACC a1 = ACC(x[uint(base + int(r + 8u) * stride)]);
      ACC a2 = ACC(x[uint(base + int(r + 16u) * stride)]);
      ACC a3 = ACC(x[uint(base + int(r + 24u) * stride)]);
      acc = combine(combine(combine(combine(acc, a0), a1), a2), a3);
    }
    for (; r < end; r += 8u) acc = combine(acc, ACC(x[uint(base + int(r) * stride)]));
  }
  partial[ty][tx] = acc;
  barrier();
  for (uint s = 4u; s > 0u; s >>= 1) {
    if (ty < s) partial[ty][tx] = combine(partial[ty][tx], partial[ty + s][tx]);
    barrier();
  }
  if (ty == 0u && o < n_out) y[gl_WorkGroupID.z * n_out + o] = STORE(partial[0][tx]);
}
