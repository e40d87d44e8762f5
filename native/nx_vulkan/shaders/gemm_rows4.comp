#version 450
// gemm_rows.comp for 4-byte types whose operands can be read 16 bytes at a time: each invocation
// computes a 16 x 4 block of outputs (16 rows, 4 columns) and walks K four steps at a time,
// loading each operand's tile in 16-byte vectors. On lavapipe every load of a per-invocation
// address is a loop over the SIMD lanes, whose cost hardly depends on the width loaded, so the
// kernel loads as few components as it can. Every output still sums its products in order
// k = 0, 1, ... from 0, so the results are gemm_rows.comp's bit for bit.
// Same bindings and push constants as gemm.comp. Defines: T, W (as gemm_rows.comp), T4 (T's
// vec4), T4_BITS (bits to T4), T4_UINT (T4 to bits). The host (ops/matmul.rs, rows4_layout) picks this kernel only
// when K, each vectorised dim and every other stride and offset of both operands are multiples
// of 4; the dim not vectorised may be ragged, and so may M's last block of 16 (a last block re-
// reads its last row, column or vector, in bounds, and does not store past the end).
// Dispatch: (ceil(N / 128), ceil(M / 16), batch) workgroups of 32 invocations, each 16 rows by
// 4 columns (ops/matmul.rs gemm_grid). Only CPU devices take it. On this project's
// 2-core lavapipe host (2026-12-04) the MNIST layer GEMM 32x784x128 took 11.4 ms with vec4
// loads and 4 x 4 blocks, 6.6 with 64-bit loads, 4.5-5.0 with A's tile shared by broadcast,
// 2.7-3.2 with 8 x 4 blocks; then (best of 8 blocks, alternating builds in one session) 2.7
// -> 1.8 ms with 16 x 4 blocks and one K step per loop iteration, x^T g (784x32x128) 4.0 ->
// 2.2-2.3 ms. 32 x 4 blocks gained ~8% more on the first and nothing on the second; two or
// four K steps per iteration were slower than one (more code, compiled more slowly too).
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
// A row's four results as one 16-byte vector in two 64-bit components, where N is a multiple of
// 4 (stores are lane loops too: two instead of four).
layout(set = 0, binding = 2) restrict writeonly buffer C8 { u64vec2 c8[]; };
#define STORE_C4(o, v0, v1, v2, v3) { \
    uvec4 bits_ = T4_UINT(T4(T(v0), T(v1), T(v2), T(v3))); \
    c8[(o) / 4u] = u64vec2(pack64(bits_.xy), pack64(bits_.zw)); }
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
  uint row = gl_WorkGroupID.y * 16u;
  uint batch = gl_WorkGroupID.z;
  // Vector indices (elements / 4) of each operand's vectors at k = 0, and their steps per 4 k.
  // A's sixteen: along K, row r's vector k .. k + 3 (rows past the end re-read the last one);
  // across K, vector i holds rows row + 4 (i % 4) .. + 3 at k + i / 4 (a block past the end
  // re-reads the last one). B's four: along K, column q's; across K, columns col .. col + 3 at
  // k + j.
  uint a_base = (pc[4] + batch * pc[5]) / 4u, b_base = (pc[8] + batch * pc[9]) / 4u;
#define A_VEC(i) (a_base + (A_ALONG_K ? min(row + i, M - 1u) * (pc[6] / 4u) \
                                      : min(row / 4u + (i) % 4u, M / 4u - 1u) + (i) / 4u * (pc[7] / 4u)))
#define B_VEC(j) (b_base + (B_ALONG_K ? min(col + j, N - 1u) * (pc[11] / 4u) : col / 4u + j * (pc[10] / 4u)))
  uint av[16] = uint[16](A_VEC(0u), A_VEC(1u), A_VEC(2u), A_VEC(3u), A_VEC(4u), A_VEC(5u), A_VEC(6u), A_VEC(7u),
                         A_VEC(8u), A_VEC(9u), A_VEC(10u), A_VEC(11u), A_VEC(12u), A_VEC(13u), A_VEC(14u), A_VEC(15u));
  uint bv0 = B_VEC(0u), bv1 = B_VEC(1u), bv2 = B_VEC(2u), bv3 = B_VEC(3u);
  uint a_step = A_ALONG_K ? 1u : pc[7], b_step = B_ALONG_K ? 1u : pc[10];
  // lavapipe stores every value a loop carries lane by lane (a branch per SIMD lane), so the
  // loop carries nothing but k and the 64 sums (separate variables), each written once per 4 k:
  // the products of a step go into a sum through values local to the iteration, in order k,
  // k + 1, ..., exactly as one += per product would. Sixteen rows per invocation: each loaded
  // word of B (each lane's own) serves sixteen rows' products.
#define FOR_ROWS_BUT_LAST(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14)
#define FOR_ROWS(X) FOR_ROWS_BUT_LAST(X) X(15)
#define DECLARE4(r) W c##r##0 = W(0), c##r##1 = W(0), c##r##2 = W(0), c##r##3 = W(0);
  FOR_ROWS(DECLARE4)
// x[i][j]: A's vector i's component j, B's row j: y0..y3. A(row + r, k + j) and B(k + j, col + q)
// whichever way the vectors run (across K, vector 4 j + r / 4 holds rows 4 (r / 4) .. + 3 at k + j).
#define AX(r, j) W(A_ALONG_K ? x[r][j] : x[4 * j + r / 4][r % 4])
#define BY(j, q) W(B_ALONG_K ? y##q[j] : y##j[q])
#define SUM4(r, q) (((s##r##q + AX(r, 0) * BY(0, q)) + AX(r, 1) * BY(1, q)) + AX(r, 2) * BY(2, q)) + AX(r, 3) * BY(3, q)
#define ROW4(r) s##r##0 = SUM4(r, 0); s##r##1 = SUM4(r, 1); s##r##2 = SUM4(r, 2); s##r##3 = SUM4(r, 3);
#define STEP(v) { \
    LOAD_A(v) \
    T4 y0 = vec_of(b4[bv0 + (v) * b_step]), y1 = vec_of(b4[bv1 + (v) * b_step]), y2 = vec_of(b4[bv2 + (v) * b_step]), y3 = vec_of(b4[bv3 + (v) * b_step]); \
    FOR_ROWS(ROW4) }
#define LOAD4(r) W s##r##0 = c##r##0, s##r##1 = c##r##1, s##r##2 = c##r##2, s##r##3 = c##r##3;
#define STORE4(r) c##r##0 = s##r##0; c##r##1 = s##r##1; c##r##2 = s##r##2; c##r##3 = s##r##3;
#define K_LOOP \
  for (; kv < kvs; ++kv) { \
    FOR_ROWS(LOAD4) \
    STEP(kv) \
    FOR_ROWS(STORE4) \
  }
  // A's 16 x 4 tile is the same for every invocation (rows come from the workgroup). Where a
  // subgroup has 8 lanes (lavapipe's 256-bit vectors), lane l loads only four 8-byte words of it
  // (half l % 2 of vectors l / 2, l / 2 + 4, l / 2 + 8 and l / 2 + 12) and the others take them
  // by broadcast: four load loops instead of thirty-two per step.
  uint lane = gl_SubgroupInvocationID;
  uint a_lane = (lane / 2u) % 4u;
  uint av0 = av[a_lane], av1 = av[a_lane + 4u], av2 = av[a_lane + 8u], av3 = av[a_lane + 12u];
#define A_BCAST(w, i) T4_BITS(uvec4(subgroupBroadcast(w, 2u * (i)), subgroupBroadcast(w, 2u * (i) + 1u)))
#define A_WORD(base, v) unpack32(a8[2u * (base + (v) * a_step) + (lane & 1u)])
#define A_VEC8(i) T4_BITS(uvec4(unpack32(a8[2u * (i)]), unpack32(a8[2u * (i) + 1u])))
  // K / 4 iterations (within lavapipe's loop limit: ops/mod.rs, LAVAPIPE_LOOP_BUDGET).
  uint kv = 0u, kvs = K / 4u;
  if (gl_SubgroupSize == 8u) {
#define BCAST4(w) A_BCAST(w, 0u), A_BCAST(w, 1u), A_BCAST(w, 2u), A_BCAST(w, 3u)
#define LOAD_A(v) uvec2 w0 = A_WORD(av0, v), w1 = A_WORD(av1, v), w2 = A_WORD(av2, v), w3 = A_WORD(av3, v); \
    T4 x[16] = T4[16](BCAST4(w0), BCAST4(w1), BCAST4(w2), BCAST4(w3));
    K_LOOP
#undef LOAD_A
  } else {
#define A_AT(i, v) A_VEC8(av[i] + (v) * a_step)
#define LOAD_A(v) T4 x[16] = T4[16](A_AT(0, v), A_AT(1, v), A_AT(2, v), A_AT(3, v), A_AT(4, v), A_AT(5, v), A_AT(6, v), \
    A_AT(7, v), A_AT(8, v), A_AT(9, v), A_AT(10, v), A_AT(11, v), A_AT(12, v), A_AT(13, v), A_AT(14, v), A_AT(15, v));
    K_LOOP
#undef LOAD_A
  }

#define ROW_OF(r) W[4](c##r##0, c##r##1, c##r##2, c##r##3),
  W acc[16][4] = W[16][4](FOR_ROWS_BUT_LAST(ROW_OF) W[4](c150, c151, c152, c153));
  if (!live) return;
  // Rows past M (a last, partial block) and columns past N store nothing. One STORE_C in a loop,
  // not one per result: a fused GEMM's epilogue is expanded once.
  for (uint r = 0u; r < 16u && row + r < M; ++r) {
    uint o = (batch * M + row + r) * N + col;
#ifdef STORE_C4
    if (N % 4u == 0u) {
      STORE_C4(o, acc[r][0], acc[r][1], acc[r][2], acc[r][3])
      continue;
    }
#endif
    for (uint q = 0u; q < 4u && col + q < N; ++q) STORE_C(o + q, acc[r][q]);
  }
}
