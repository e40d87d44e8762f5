#version 450
// Batched GEMM without shared memory: one invocation per output element, walking K through
// strides. For CPU devices (lavapipe), where workgroup barriers are expensive and caches do the
// tiling: ~10x faster there than gemm.comp. Same bindings, push constants and result layout as
// gemm.comp. Dispatch: elementwise grid over batch * M * ceil(N / 4) invocations.
// Defines: T storage type, W accumulator.
#include "common.glsl"
layout(local_size_x = WG) in;
layout(set = 0, binding = 0) readonly buffer A { T a[]; };
layout(set = 0, binding = 1) readonly buffer B { T b[]; };
layout(set = 0, binding = 2) writeonly buffer C { T c[]; };

// Each invocation computes 4 neighbouring outputs of a row (columns 4j .. 4j + 3), so each a
// element is loaded once for 4 products: lavapipe loads strided operands lane by lane, and the
// loads, not the arithmetic, bound this kernel. Every output still sums its products in order
// k = 0, 1, ... from 0, so the results are those of one output per invocation.
void main() {
  uint M = pc[0], N = pc[1], K = pc[2], batches = pc[3];
  uint N4 = (N + 3u) / 4u;
  uint i = element_index();
  if (i >= batches * M * N4) return;
  uint col = (i % N4) * 4u;
  uint row = (i / N4) % M;
  uint batch = i / (M * N4);
  uint ai = pc[4] + batch * pc[5] + row * pc[6];
  uint bi = pc[8] + batch * pc[9] + col * pc[11];
  uint cols = min(4u, N - col);
  W acc0 = W(0), acc1 = W(0), acc2 = W(0), acc3 = W(0);
  if (cols == 4u) {
    for (uint k = 0; k < K; ++k) {
      W x = W(a[ai]);
      acc0 += x * W(b[bi]);
      acc1 += x * W(b[bi + pc[11]]);
      acc2 += x * W(b[bi + 2u * pc[11]]);
      acc3 += x * W(b[bi + 3u * pc[11]]);
      ai += pc[7];
      bi += pc[10];
    }
  } else {
    for (uint k = 0; k < K; ++k) {
      W x = W(a[ai]);
      acc0 += x * W(b[bi]);
      if (cols > 1u) acc1 += x * W(b[bi + pc[11]]);
      if (cols > 2u) acc2 += x * W(b[bi + 2u * pc[11]]);
      ai += pc[7];
      bi += pc[10];
    }
  }
  uint o = (batch * M + row) * N + col;
  c[o] = T(acc0);
  if (cols > 1u) c[o + 1u] = T(acc1);
  if (cols > 2u) c[o + 2u] = T(acc2);
  if (cols > 3u) c[o + 3u] = T(acc3);
}
