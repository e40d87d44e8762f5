#version 450
// Reduction over any set of axes: one workgroup per output element, each
// thread folds a strided slice of the reduced elements, then a fixed-order tree in shared memory.
// The order depends only on shapes, so results are identical across runs and batch caps.
// Defines: T (element), ACC (accumulator: f64 for precise f32; for integers the wrapping compute
// type, which gives Nx's modular sums), IS_INT. Specialization: constant 0 = op (0 sum,
// 1 product, 2 max, 3 min); T4 (f32's vec4) for the path over contiguous, aligned elements.
// Bindings: 0 x (read), 1 y (write, contiguous over kept axes).
// Push: pc[0] outputs, pc[1] reduced count, pc[2] kept rank, pc[3] reduced rank, pc[4] in offset,
//       pc[5..11] kept dims, pc[11..17] kept strides, pc[17..23] reduced dims, pc[23..29] reduced strides,
//       pc[29] total reduced length and pc[30] chunks in a split reduction's first pass (else 0).
#include "common.glsl"
// Its own workgroup size (not the element-wise kernels' constant 3): one workgroup per output,
// folded in a shared tree whose shape (and so a float sum's rounding) stays the same on every device.
#define WG 256
layout(local_size_x = WG) in;
layout(constant_id = 0) const uint OP = 0;
// Split reductions (see ops/reduce.rs) pass partials between their two passes in ACC.
#ifdef IN_ACC
layout(set = 0, binding = 0) restrict readonly buffer X { ACC x[]; };
#else
layout(set = 0, binding = 0) restrict readonly buffer X { T x[]; };
#ifdef T4
layout(set = 0, binding = 0) restrict readonly buffer X4 { T4 x4[]; };
#endif
#endif
#ifdef OUT_ACC
layout(set = 0, binding = 1) restrict writeonly buffer Y { ACC y[]; };
#define STORE(v) (v)
#else
layout(set = 0, binding = 1) restrict writeonly buffer Y { T y[]; };
#define STORE(v) REDUCED(v)
#endif
shared ACC partial[WG];

#include "reduce_ops.glsl"

void main() {
  uint n_out = pc[0], n_red = pc[1], kept_rank = pc[2], red_rank = pc[3];
  uint lid = gl_LocalInvocationID.x;
  // One output per workgroup, over a 2-D grid of workgroups (uniform per workgroup, so the early
  // return cannot split a barrier).
  uint o = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  if (o >= n_out) return;
  uint base = strided(o, kept_rank, 5, 11, pc[4]);
  // First pass of a split reduction: the innermost kept dim is the chunk (pc[30] chunks), and
  // the last chunk stops at the reduced length pc[29].
  uint limit = n_red;
  if (pc[29] != 0u) limit = min(n_red, pc[29] - (o % pc[30]) * n_red);
  ACC acc = identity();
#ifdef T4
  // Contiguous and 16-byte aligned (uniform per workgroup): each thread folds vectors of 4,
  // their elements in order (vectors lid, lid + WG, ...), four vectors' loads in flight.
  if (red_rank == 1u && pc[23] == 1u && (base & 3u) == 0u && (limit & 3u) == 0u) {
    uint first = base / 4u, vectors = limit / 4u, r = lid;
    for (; r + 3u * WG < vectors; r += 4u * WG) {
      T4 v[4] = T4[4](x4[first + r], x4[first + r + WG], x4[first + r + 2u * WG], x4[first + r + 3u * WG]);
      for (int q = 0; q < 4; ++q)
        acc = combine(combine(combine(combine(acc, ACC(v[q].x)), ACC(v[q].y)), ACC(v[q].z)), ACC(v[q].w));
    }
    for (; r < vectors; r += WG) {
      T4 v = x4[first + r];
      acc = combine(combine(combine(combine(acc, ACC(v.x)), ACC(v.y)), ACC(v.z)), ACC(v.w));
    }
  } else
#endif
  if (red_rank == 1u) {  // one reduced dim (the common case): no division per element
    int stride = int(pc[23]);
    uint r = lid;
    // Four loads in flight before their combines (in order): a split reduction's second pass
    // runs as one workgroup per output, where serial load latency would dominate.
    for (; r + 3u * WG < limit; r += 4u * WG) {
      ACC a0 = ACC(x[uint(int(base) + int(r) * stride)]);
      ACC a1 = ACC(x[uint(int(base) + int(r + WG) * stride)]);
      ACC a2 = ACC(x[uint(int(base) + int(r + 2u * WG) * stride)]);
      ACC a3 = ACC(x[uint(int(base) + int(r + 3u * WG) * stride)]);
      acc = combine(combine(combine(combine(acc, a0), a1), a2), a3);
    }
    for (; r < limit; r += WG) acc = combine(acc, ACC(x[uint(int(base) + int(r) * stride)]));
  } else {
    for (uint r = lid; r < limit; r += WG) acc = combine(acc, ACC(x[strided(r, red_rank, 17, 23, base)]));
  }
  partial[lid] = acc;
  barrier();
  for (uint s = WG / 2; s > 0; s >>= 1) {
    if (lid < s) partial[lid] = combine(partial[lid], partial[lid + s]);
    barrier();
  }
  if (lid == 0) y[o] = STORE(partial[0]);
}
