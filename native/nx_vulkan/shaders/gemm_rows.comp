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
  // The K loop carries only k and the eight sums, each written once per four k (lavapipe stores
  // every value a loop carries lane by lane on each write): the products of four k go into the
  // sums through values local to the iteration, in order k, k + 1, ..., as one += per product
  // would. A block of fewer than 4 columns reads column 0 again for the missing ones (in bounds)
  // and does not store them. No loops inside the K loop: lavapipe counts nested iterations
  // against its loop limit (ops/mod.rs, LAVAPIPE_LOOP_BUDGET).
  uint s1 = cols > 1u ? pc[11] : 0u, s2 = cols > 2u ? 2u * pc[11] : 0u, s3 = cols > 3u ? 3u * pc[11] : 0u;
  W c00 = W(0), c01 = W(0), c02 = W(0), c03 = W(0), c10 = W(0), c11 = W(0), c12 = W(0), c13 = W(0);
#define K_STEP(k) { \
    uint ak_ = (k) * pc[7], bk_ = bi + (k) * pc[10]; \
    W x0 = W(a[ai + ak_]), x1 = W(a[ai1 + ak_]); \
    W y0 = W(b[bk_]), y1 = W(b[bk_ + s1]), y2 = W(b[bk_ + s2]), y3 = W(b[bk_ + s3]); \
    s00 = s00 + x0 * y0; s01 = s01 + x0 * y1; s02 = s02 + x0 * y2; s03 = s03 + x0 * y3; \
    s10 = s10 + x1 * y0; s11 = s11 + x1 * y1; s12 = s12 + x1 * y2; s13 = s13 + x1 * y3; }
#define LOAD_SUMS W s00 = c00, s01 = c01, s02 = c02, s03 = c03, s10 = c10, s11 = c11, s12 = c12, s13 = c13;
#define STORE_SUMS c00 = s00; c01 = s01; c02 = s02; c03 = s03; c10 = s10; c11 = s11; c12 = s12; c13 = s13;
  uint k = 0u;
  for (; k + 4u <= K; k += 4u) {
    LOAD_SUMS
    K_STEP(k) K_STEP(k + 1u) K_STEP(k + 2u) K_STEP(k + 3u)
    STORE_SUMS
  }
  for (; k < K; ++k) {
    LOAD_SUMS
    K_STEP(k)
    STORE_SUMS
  }
  W acc[2][4] = W[2][4](W[4](c00, c01, c02, c03), W[4](c10, c11, c12, c13));
  for (uint r = 0u; r < 2u && row + r < M; ++r) {
    uint o = (batch * M + row + r) * N + col;
    for (uint q = 0u; q < cols; ++q) STORE_C(o + q, acc[r][q]);
  }
}
