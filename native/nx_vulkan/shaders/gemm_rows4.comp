#version 450
// gemm_rows.comp for 4-byte types whose operands can be read 16 bytes at a time: each invocation
// computes a 4 x 4 block of outputs and walks K four steps at a time, loading each operand's
// 4 x 4 tile as four vec4s. On lavapipe every load of a per-invocation address is a loop over
// the SIMD lanes, whose cost hardly depends on the width loaded: here one vec4 load serves 8
// products, where gemm_rows.comp's scalar loads serve 1.33. Every output still sums its products
// in order k = 0, 1, ... from 0, so the results are gemm_rows.comp's bit for bit.
// Same bindings and push constants as gemm.comp. Defines: T, W (as gemm_rows.comp), T4 (T's
// vec4). The host (ops/matmul.rs, rows4_layout) picks this kernel only when K, each
// vectorised dim and every other stride and offset of both operands are multiples of 4; the
// dim not vectorised may be ragged (its last block re-reads its last row or column, in bounds,
// and does not store it).
// Dispatch: (ceil(N / 128), ceil(M / 4), batch) workgroups of 32 invocations, each 4 rows by
// 4 columns (ops/matmul.rs gemm_grid).
#include "common.glsl"
#extension GL_KHR_shader_subgroup_ballot : require
layout(local_size_x = 32) in;
// Bit 0: A's vectors run along K (else along M); bit 1: B's along K (else along N). A
// specialization constant, so each layout compiles to its own straight-line loop.
layout(constant_id = 0) const uint LAYOUT = 0;
const bool A_ALONG_K = (LAYOUT & 1u) != 0u;
const bool B_ALONG_K = (LAYOUT & 2u) != 0u;
// Each 16-byte vector is read as two 64-bit halves (T4_BITS turns the bits into T4): lavapipe's
// load loop runs once per component, so two components instead of four (the layer GEMM of the
// MNIST step, 32x784x128, took 11.4 ms as vec4 loads and 6.6 ms so, on a host where lavapipe's
// lane loop is dear: see README's lavapipe facts). A is read as 8-byte words (a8), so that a lane
// can load one word of the tile the subgroup shares (below).
layout(set = 0, binding = 0) restrict readonly buffer A8 { uint64_t a8[]; };
layout(set = 0, binding = 1) restrict readonly buffer B4 { u64vec2 b4[]; };
T4 vec_of(u64vec2 v) { return T4_BITS(uvec4(unpack32(v.x), unpack32(v.y))); }
#ifndef EPILOGUE  // the fused GEMM (fuse.rs) stores through its epilogue
layout(set = 0, binding = 2) restrict writeonly buffer C { T c[]; };
#endif

void main() {
#ifdef EPILOGUE
  epilogue_init();
#endif
  uint M = pc[0], N = pc[1], K = pc[2], batches = pc[3];
  uint MB = (M + 3u) / 4u, NB = (N + 3u) / 4u;
  // Rows and batch come from the workgroup, so they are the same for every invocation of it
  // (lavapipe loads A's uniform addresses once for all its SIMD lanes); columns past N compute
  // the last block again and store nothing (no early return: the K loop runs unmasked).
  uint nb = gl_GlobalInvocationID.x;
  bool live = nb < NB;
  uint col = min(nb, NB - 1u) * 4u;
  uint row = gl_WorkGroupID.y * 4u;
  uint batch = gl_WorkGroupID.z;
  // Vector indices (elements / 4) of each operand's four vectors at k = 0, and their steps per
  // 4 k: along K, row r's (column q's) vector k .. k + 3, rows (columns) past the end re-reading
  // the last one; across K, rows row .. row + 3 (columns col .. col + 3) at k + j.
  uint a_base = (pc[4] + batch * pc[5]) / 4u, b_base = (pc[8] + batch * pc[9]) / 4u;
#define A_VEC(j) (a_base + (A_ALONG_K ? min(row + j, M - 1u) * (pc[6] / 4u) : row / 4u + j * (pc[7] / 4u)))
#define B_VEC(j) (b_base + (B_ALONG_K ? min(col + j, N - 1u) * (pc[11] / 4u) : col / 4u + j * (pc[10] / 4u)))
  uint av0 = A_VEC(0u), av1 = A_VEC(1u), av2 = A_VEC(2u), av3 = A_VEC(3u);
  uint bv0 = B_VEC(0u), bv1 = B_VEC(1u), bv2 = B_VEC(2u), bv3 = B_VEC(3u);
  uint a_step = A_ALONG_K ? 1u : pc[7], b_step = B_ALONG_K ? 1u : pc[10];
  // lavapipe stores every value a loop carries lane by lane (a branch per SIMD lane), so the
  // loop carries nothing but k and the 16 sums, each written once per 8 k (128 products): the
  // products of a step go into a sum through values local to the iteration, in order k, k + 1,
  // ..., exactly as one += per product would.
  W c00 = W(0), c01 = W(0), c02 = W(0), c03 = W(0), c10 = W(0), c11 = W(0), c12 = W(0), c13 = W(0);
  W c20 = W(0), c21 = W(0), c22 = W(0), c23 = W(0), c30 = W(0), c31 = W(0), c32 = W(0), c33 = W(0);
// x[r][j] = A(row + r, k + j) and y[j][q] = B(k + j, col + q), whichever way the vectors run.
#define AX(r, j) W(A_ALONG_K ? x##r[j] : x##j[r])
#define BY(j, q) W(B_ALONG_K ? y##q[j] : y##j[q])
#define SUM4(r, q) (((s##r##q + AX(r, 0) * BY(0, q)) + AX(r, 1) * BY(1, q)) + AX(r, 2) * BY(2, q)) + AX(r, 3) * BY(3, q)
#define ROW4(r) s##r##0 = SUM4(r, 0); s##r##1 = SUM4(r, 1); s##r##2 = SUM4(r, 2); s##r##3 = SUM4(r, 3);
#define STEP(v) { \
    LOAD_A(v) \
    T4 y0 = vec_of(b4[bv0 + (v) * b_step]), y1 = vec_of(b4[bv1 + (v) * b_step]), y2 = vec_of(b4[bv2 + (v) * b_step]), y3 = vec_of(b4[bv3 + (v) * b_step]); \
    ROW4(0) ROW4(1) ROW4(2) ROW4(3) }
#define LOAD_SUMS W s00 = c00, s01 = c01, s02 = c02, s03 = c03, s10 = c10, s11 = c11, s12 = c12, s13 = c13, \
    s20 = c20, s21 = c21, s22 = c22, s23 = c23, s30 = c30, s31 = c31, s32 = c32, s33 = c33;
#define STORE_SUMS c00 = s00; c01 = s01; c02 = s02; c03 = s03; c10 = s10; c11 = s11; c12 = s12; c13 = s13; \
    c20 = s20; c21 = s21; c22 = s22; c23 = s23; c30 = s30; c31 = s31; c32 = s32; c33 = s33;
#define K_LOOP \
  for (; kv + 2u <= kvs; kv += 2u) { \
    LOAD_SUMS \
    STEP(kv) \
    STEP(kv + 1u) \
    STORE_SUMS \
  } \
  if (kv < kvs) { \
    LOAD_SUMS \
    STEP(kv) \
    STORE_SUMS \
  }
  // A's 4 x 4 tile is the same for every invocation (rows come from the workgroup). Where a
  // subgroup has 8 lanes (lavapipe's 256-bit vectors), lane l loads only its 8 bytes of it (half
  // l % 2 of vector l / 2) and the others take them by broadcast: one load loop instead of
  // eight per step.
  uint lane = gl_SubgroupInvocationID;
  uint av_lane = lane / 2u == 0u ? av0 : lane / 2u == 1u ? av1 : lane / 2u == 2u ? av2 : av3;
#define A_BCAST(w, r) T4_BITS(uvec4(subgroupBroadcast(w, 2u * r), subgroupBroadcast(w, 2u * r + 1u)))
#define A_VEC8(i) T4_BITS(uvec4(unpack32(a8[2u * (i)]), unpack32(a8[2u * (i) + 1u])))
  // K / 8 iterations (within lavapipe's loop limit: ops/mod.rs, LAVAPIPE_LOOP_BUDGET), then
  // the last 4 if K is not a multiple of 8.
  uint kv = 0u, kvs = K / 4u;
  if (gl_SubgroupSize == 8u) {
#define LOAD_A(v) uvec2 w = unpack32(a8[2u * (av_lane + (v) * a_step) + (lane & 1u)]); \
    T4 x0 = A_BCAST(w, 0u), x1 = A_BCAST(w, 1u), x2 = A_BCAST(w, 2u), x3 = A_BCAST(w, 3u);
    K_LOOP
#undef LOAD_A
  } else {
#define LOAD_A(v) T4 x0 = A_VEC8(av0 + (v) * a_step), x1 = A_VEC8(av1 + (v) * a_step), x2 = A_VEC8(av2 + (v) * a_step), x3 = A_VEC8(av3 + (v) * a_step);
    K_LOOP
#undef LOAD_A
  }

  W acc[4][4] = W[4][4](W[4](c00, c01, c02, c03), W[4](c10, c11, c12, c13), W[4](c20, c21, c22, c23), W[4](c30, c31, c32, c33));
  if (!live) return;
  for (uint r = 0u; r < 4u && row + r < M; ++r) {
    uint o = (batch * M + row + r) * N + col;
    for (uint q = 0u; q < 4u && col + q < N; ++q) STORE_C(o + q, acc[r][q]);
  }
}
