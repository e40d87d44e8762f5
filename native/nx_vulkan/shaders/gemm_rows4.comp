#version 450
// gemm_rows.comp for 4-byte types whose operands can be read 16 bytes at a time: each invocation
// computes an 8 x 4 block of outputs (8 rows, 4 columns) and walks K four steps at a time,
// loading each operand's tile in 16-byte vectors. On lavapipe every load of a per-invocation
// address is a loop over the SIMD lanes, whose cost hardly depends on the width loaded, so the
// kernel loads as few components as it can. Every output still sums its products in order
// k = 0, 1, ... from 0, so the results are gemm_rows.comp's bit for bit.
// Same bindings and push constants as gemm.comp. Defines: T, W (as gemm_rows.comp), T4 (T's
// vec4), T4_BITS (bits to T4). The host (ops/matmul.rs, rows4_layout) picks this kernel only
// when K, each vectorised dim and every other stride and offset of both operands are multiples
// of 4; the dim not vectorised may be ragged, and so may M's last block of 8 (a last block re-
// reads its last row, column or vector, in bounds, and does not store past the end).
// Dispatch: (ceil(N / 128), ceil(M / 8), batch) workgroups of 32 invocations, each 8 rows by
// 4 columns (ops/matmul.rs gemm_grid). Only CPU devices take it. On this project's
// 2-core lavapipe host (2026-12-04) the MNIST layer GEMM 32x784x128 took 11.4 ms with vec4
// loads and 4 x 4 blocks, 6.6 with 64-bit loads, 4.5-5.0 with A's tile shared by broadcast,
// 2.7-3.2 with 8 x 4 blocks.
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
  uint NB = (N + 3u) / 4u;
  // Rows and batch come from the workgroup, so they are the same for every invocation of it;
  // columns past N compute the last block again and store nothing (no early return: the K loop
  // runs unmasked).
  uint nb = gl_GlobalInvocationID.x;
  bool live = nb < NB;
  uint col = min(nb, NB - 1u) * 4u;
  uint row = gl_WorkGroupID.y * 8u;
  uint batch = gl_WorkGroupID.z;
  // Vector indices (elements / 4) of each operand's vectors at k = 0, and their steps per 4 k.
  // A's eight: along K, row r's vector k .. k + 3 (rows past the end re-read the last one);
  // across K, vector i holds rows row + 4 (i % 2) .. + 3 at k + i / 2 (a block past the end
  // re-reads the last one). B's four: along K, column q's; across K, columns col .. col + 3 at
  // k + j.
  uint a_base = (pc[4] + batch * pc[5]) / 4u, b_base = (pc[8] + batch * pc[9]) / 4u;
#define A_VEC(i) (a_base + (A_ALONG_K ? min(row + i, M - 1u) * (pc[6] / 4u) \
                                      : min(row / 4u + (i) % 2u, M / 4u - 1u) + (i) / 2u * (pc[7] / 4u)))
#define B_VEC(j) (b_base + (B_ALONG_K ? min(col + j, N - 1u) * (pc[11] / 4u) : col / 4u + j * (pc[10] / 4u)))
  uint av[8] = uint[8](A_VEC(0u), A_VEC(1u), A_VEC(2u), A_VEC(3u), A_VEC(4u), A_VEC(5u), A_VEC(6u), A_VEC(7u));
  uint bv0 = B_VEC(0u), bv1 = B_VEC(1u), bv2 = B_VEC(2u), bv3 = B_VEC(3u);
  uint a_step = A_ALONG_K ? 1u : pc[7], b_step = B_ALONG_K ? 1u : pc[10];
  // lavapipe stores every value a loop carries lane by lane (a branch per SIMD lane), so the
  // loop carries nothing but k and the 32 sums, each written once per 8 k: the products of a
  // step go into a sum through values local to the iteration, in order k, k + 1, ..., exactly
  // as one += per product would. Eight rows per invocation: each loaded word of B (each lane's
  // own) serves eight rows' products.
  W c00 = W(0), c01 = W(0), c02 = W(0), c03 = W(0), c10 = W(0), c11 = W(0), c12 = W(0), c13 = W(0);
  W c20 = W(0), c21 = W(0), c22 = W(0), c23 = W(0), c30 = W(0), c31 = W(0), c32 = W(0), c33 = W(0);
  W c40 = W(0), c41 = W(0), c42 = W(0), c43 = W(0), c50 = W(0), c51 = W(0), c52 = W(0), c53 = W(0);
  W c60 = W(0), c61 = W(0), c62 = W(0), c63 = W(0), c70 = W(0), c71 = W(0), c72 = W(0), c73 = W(0);
// x[r][j] = A(row + r, k + j) and y[j][q] = B(k + j, col + q), whichever way the vectors run.
#define AX(r, j) W(A_ALONG_K ? x[r][j] : x[2 * j + r / 4][r % 4])
#define BY(j, q) W(B_ALONG_K ? y##q[j] : y##j[q])
#define SUM4(r, q) (((s##r##q + AX(r, 0) * BY(0, q)) + AX(r, 1) * BY(1, q)) + AX(r, 2) * BY(2, q)) + AX(r, 3) * BY(3, q)
#define ROW4(r) s##r##0 = SUM4(r, 0); s##r##1 = SUM4(r, 1); s##r##2 = SUM4(r, 2); s##r##3 = SUM4(r, 3);
#define STEP(v) { \
    LOAD_A(v) \
    T4 y0 = vec_of(b4[bv0 + (v) * b_step]), y1 = vec_of(b4[bv1 + (v) * b_step]), y2 = vec_of(b4[bv2 + (v) * b_step]), y3 = vec_of(b4[bv3 + (v) * b_step]); \
    ROW4(0) ROW4(1) ROW4(2) ROW4(3) ROW4(4) ROW4(5) ROW4(6) ROW4(7) }
#define LOAD_SUMS W s00 = c00, s01 = c01, s02 = c02, s03 = c03, s10 = c10, s11 = c11, s12 = c12, s13 = c13, \
    s20 = c20, s21 = c21, s22 = c22, s23 = c23, s30 = c30, s31 = c31, s32 = c32, s33 = c33, \
    s40 = c40, s41 = c41, s42 = c42, s43 = c43, s50 = c50, s51 = c51, s52 = c52, s53 = c53, \
    s60 = c60, s61 = c61, s62 = c62, s63 = c63, s70 = c70, s71 = c71, s72 = c72, s73 = c73;
#define STORE_SUMS c00 = s00; c01 = s01; c02 = s02; c03 = s03; c10 = s10; c11 = s11; c12 = s12; c13 = s13; \
    c20 = s20; c21 = s21; c22 = s22; c23 = s23; c30 = s30; c31 = s31; c32 = s32; c33 = s33; \
    c40 = s40; c41 = s41; c42 = s42; c43 = s43; c50 = s50; c51 = s51; c52 = s52; c53 = s53; \
    c60 = s60; c61 = s61; c62 = s62; c63 = s63; c70 = s70; c71 = s71; c72 = s72; c73 = s73;
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
  // A's 8 x 4 tile is the same for every invocation (rows come from the workgroup). Where a
  // subgroup has 8 lanes (lavapipe's 256-bit vectors), lane l loads only two 8-byte words of it
  // (half l % 2 of vectors l / 2 and l / 2 + 4) and the others take them by broadcast: two load
  // loops instead of sixteen per step.
  uint lane = gl_SubgroupInvocationID;
  uint av_lo = av[(lane / 2u) % 4u], av_hi = av[(lane / 2u) % 4u + 4u];
#define A_BCAST(w, i) T4_BITS(uvec4(subgroupBroadcast(w, 2u * (i)), subgroupBroadcast(w, 2u * (i) + 1u)))
#define A_VEC8(i) T4_BITS(uvec4(unpack32(a8[2u * (i)]), unpack32(a8[2u * (i) + 1u])))
  // K / 8 iterations (within lavapipe's loop limit: ops/mod.rs, LAVAPIPE_LOOP_BUDGET), then
  // the last 4 if K is not a multiple of 8.
  uint kv = 0u, kvs = K / 4u;
  if (gl_SubgroupSize == 8u) {
#define LOAD_A(v) uvec2 wl = unpack32(a8[2u * (av_lo + (v) * a_step) + (lane & 1u)]); \
    uvec2 wh = unpack32(a8[2u * (av_hi + (v) * a_step) + (lane & 1u)]); \
    T4 x[8] = T4[8](A_BCAST(wl, 0u), A_BCAST(wl, 1u), A_BCAST(wl, 2u), A_BCAST(wl, 3u), \
                    A_BCAST(wh, 0u), A_BCAST(wh, 1u), A_BCAST(wh, 2u), A_BCAST(wh, 3u));
    K_LOOP
#undef LOAD_A
  } else {
#define LOAD_A(v) T4 x[8] = T4[8](A_VEC8(av[0] + (v) * a_step), A_VEC8(av[1] + (v) * a_step), A_VEC8(av[2] + (v) * a_step), \
    A_VEC8(av[3] + (v) * a_step), A_VEC8(av[4] + (v) * a_step), A_VEC8(av[5] + (v) * a_step), A_VEC8(av[6] + (v) * a_step), \
    A_VEC8(av[7] + (v) * a_step));
    K_LOOP
#undef LOAD_A
  }

  W acc[8][4] = W[8][4](W[4](c00, c01, c02, c03), W[4](c10, c11, c12, c13), W[4](c20, c21, c22, c23), W[4](c30, c31, c32, c33),
                        W[4](c40, c41, c42, c43), W[4](c50, c51, c52, c53), W[4](c60, c61, c62, c63), W[4](c70, c71, c72, c73));
  if (!live) return;
  for (uint r = 0u; r < 8u && row + r < M; ++r) {
    uint o = (batch * M + row + r) * N + col;
    for (uint q = 0u; q < 4u && col + q < N; ++q) STORE_C(o + q, acc[r][q]);
  }
}
