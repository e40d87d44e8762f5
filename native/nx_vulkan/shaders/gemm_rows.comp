#version 450
// Batched GEMM without shared memory: one invocation per output element, walking K through
// strides. For CPU devices (lavapipe), where workgroup barriers are expensive and caches do the
// tiling: ~10x faster there than gemm.comp. Same bindings, push constants and result layout as
// gemm.comp. Dispatch: elementwise grid over batch * M * ceil(N / 4) invocations.
// Defines: T storage type, W accumulator.
#include "common.glsl"
layout(local_size_x_id = 3) in;
layout(set = 0, binding = 0) readonly buffer A { T a[]; };
layout(set = 0, binding = 1) readonly buffer B { T b[]; };
#ifndef EPILOGUE  // the fused GEMM (fuse.rs) stores through its epilogue
layout(set = 0, binding = 2) writeonly buffer C { T c[]; };
#endif

// Each invocation computes a 2 x 4 block of outputs (rows 2r, 2r + 1, columns 4j .. 4j + 3), so
// each a element is loaded once for 4 products and each b element once for 2: lavapipe loads
// strided operands lane by lane, and the loads, not the arithmetic, bound this kernel. Every
// output still sums its products in order k = 0, 1, ... from 0, so the results are those of one
// output per invocation.
void main() {
#ifdef EPILOGUE
  epilogue_init();
#endif
  uint M = pc[0], N = pc[1], K = pc[2], batches = pc[3];
  uint N4 = (N + 3u) / 4u, M2 = (M + 1u) / 2u;
  uint i = element_index();
  if (i >= batches * M2 * N4) return;
  uint col = (i % N4) * 4u;
  uint row = ((i / N4) % M2) * 2u;
  uint batch = i / (M2 * N4);
  uint ai = pc[4] + batch * pc[5] + row * pc[6];
  uint bi = pc[8] + batch * pc[9] + col * pc[11];
  uint cols = min(4u, N - col);
  // A last odd row reads row M - 1 twice (in bounds) and stores it once.
  uint ai1 = ai + (row + 1u < M ? pc[6] : 0u);
  W acc[2][4];
  for (int r = 0; r < 2; ++r) for (int q = 0; q < 4; ++q) acc[r][q] = W(0);
  // No loops inside the K loop: lavapipe counts nested iterations against its loop limit
  // (ops/mod.rs, LAVAPIPE_LOOP_BUDGET).
  if (cols == 4u) {
    for (uint k = 0; k < K; ++k) {
      W x0 = W(a[ai]), x1 = W(a[ai1]);
      W y0 = W(b[bi]), y1 = W(b[bi + pc[11]]), y2 = W(b[bi + 2u * pc[11]]), y3 = W(b[bi + 3u * pc[11]]);
      acc[0][0] += x0 * y0; acc[0][1] += x0 * y1; acc[0][2] += x0 * y2; acc[0][3] += x0 * y3;
      acc[1][0] += x1 * y0; acc[1][1] += x1 * y1; acc[1][2] += x1 * y2; acc[1][3] += x1 * y3;
      ai += pc[7];
      ai1 += pc[7];
      bi += pc[10];
    }
  } else {
    // 1 to 3 columns: the missing ones read column 0 again (in bounds) and are not stored.
    uint s1 = cols > 1u ? pc[11] : 0u, s2 = cols > 2u ? 2u * pc[11] : 0u;
    for (uint k = 0; k < K; ++k) {
      W x0 = W(a[ai]), x1 = W(a[ai1]);
      W y0 = W(b[bi]), y1 = W(b[bi + s1]), y2 = W(b[bi + s2]);
      acc[0][0] += x0 * y0; acc[0][1] += x0 * y1; acc[0][2] += x0 * y2;
      acc[1][0] += x1 * y0; acc[1][1] += x1 * y1; acc[1][2] += x1 * y2;
      ai += pc[7];
      ai1 += pc[7];
      bi += pc[10];
    }
  }
  for (uint r = 0u; r < 2u && row + r < M; ++r) {
    uint o = (batch * M + row + r) * N + col;
    for (uint q = 0u; q < cols; ++q) STORE_C(o + q, acc[r][q]);
  }
}
