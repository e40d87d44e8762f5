#version 450
// Batched GEMM without shared memory: one invocation per output element, walking K through
// strides. For CPU devices (lavapipe), where workgroup barriers are expensive and caches do the
// tiling: ~10x faster there than gemm.comp. Same bindings, push constants and result layout as
// gemm.comp. Dispatch: elementwise grid over batch * M * N outputs.
// Defines: T storage type, W accumulator.
#include "common.glsl"
layout(local_size_x = WG) in;
layout(set = 0, binding = 0) readonly buffer A { T a[]; };
layout(set = 0, binding = 1) readonly buffer B { T b[]; };
layout(set = 0, binding = 2) writeonly buffer C { T c[]; };

void main() {
  uint M = pc[0], N = pc[1], K = pc[2], batches = pc[3];
  uint i = element_index();
  if (i >= batches * M * N) return;
  uint col = i % N;
  uint row = (i / N) % M;
  uint batch = i / (M * N);
  uint ai = pc[4] + batch * pc[5] + row * pc[6];
  uint bi = pc[8] + batch * pc[9] + col * pc[11];
  W acc = W(0);
  for (uint k = 0; k < K; ++k) {
    acc += W(a[ai]) * W(b[bi]);
    ai += pc[7];
    bi += pc[10];
  }
  c[i] = T(acc);
}
