#version 450
// Batched GEMM for large M and N, register-blocked: a workgroup of 16x16 threads owns a
// BM x BN block of c (BM = BN = 16 TM), each thread a TM x TM sub-block made of 4x4 pieces
// 64 rows/columns apart (rows ty*4 + 64 p + i), so each thread reads its operands from shared
// memory as whole vec4s and stores runs of 4 columns. K is staged through shared memory BK at a
// time in two buffers: the next tile's global loads are issued before the current tile's
// arithmetic, and one barrier per tile suffices (a buffer is written only after every thread has
// passed the barrier that ended its last use). Each output accumulates a[k] b[k] for
// k = 0, 1, ... in order from +0 (padding adds +0 products, which change nothing), the same
// sequence as gemm.comp.
// Defines as gemm.comp, plus TM (4: 64x64 blocks, BK 16; 8: 128x128 blocks, BK 8; either way
// each thread loads 4 elements of each operand per tile). Only for 32-bit accumulators W.
// Bindings and push constants as gemm.comp. Dispatch: (ceil(N/BN), ceil(M/BM), batch).
#include "common.glsl"
#define BM (16 * TM)
#define BN (16 * TM)
#define BK (64 / TM)
#define BM4 (BM / 4)
#if defined(IS_INT) && defined(IS_SIGNED)
#define W4 ivec4
#elif defined(IS_INT)
#define W4 uvec4
#else
#define W4 vec4
#endif
layout(local_size_x = 16, local_size_y = 16) in;
layout(set = 0, binding = 0) readonly buffer A { T a[]; };
layout(set = 0, binding = 1) readonly buffer B { T b[]; };
layout(set = 0, binding = 2) writeonly buffer C { T c[]; };
// [buffer][k][m / 4], one vec4 of padding per row: column-wise stores of a k-fastest tile then
// spread over all banks instead of hitting BK-way conflicts.
shared W4 ta[2][BK][BM4 + 1];
shared W4 tb[2][BK][BM4 + 1];

void main() {
  uint M = pc[0], N = pc[1], K = pc[2];
  uint batch = gl_WorkGroupID.z;
  uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y, tid = ty * 16u + tx;
  uint row0 = gl_WorkGroupID.y * BM, col0 = gl_WorkGroupID.x * BN;
  uint a_base = pc[4] + batch * pc[5], a_ms = pc[6], a_ks = pc[7];
  uint b_base = pc[8] + batch * pc[9], b_ks = pc[10], b_ns = pc[11];
  // Which index runs fastest across threads in the tile loads: the operand's unit-stride one, so
  // plain and transposed operands both load in coalesced runs (a uniform branch).
  bool a_k_fast = a_ks == 1u, b_n_fast = b_ns == 1u || b_ks != 1u;

  W acc[TM][TM];
  for (int i = 0; i < TM; ++i) for (int j = 0; j < TM; ++j) acc[i][j] = W(0);
  W ra[4], rb[4];

  uint tiles = (K + BK - 1u) / BK;
  for (uint t = 0u; t <= tiles; ++t) {
    // Stage tile t - 1 (loaded into registers last time) into buffer (t - 1) & 1.
    if (t > 0u) {
      uint s = (t - 1u) & 1u;
      for (uint l = 0u; l < 4u; ++l) {
        uint e = tid + l * 256u;
        uint am = a_k_fast ? e / BK : e % BM, ak = a_k_fast ? e % BK : e / BM;
        ta[s][ak][am >> 2][am & 3u] = ra[l];
        uint bn = b_n_fast ? e % BN : e / BK, bk = b_n_fast ? e / BN : e % BK;
        tb[s][bk][bn >> 2][bn & 3u] = rb[l];
      }
      barrier();
    }
    // Issue tile t's global loads before computing on tile t - 1.
    if (t < tiles) {
      uint k0 = t * BK;
      for (uint l = 0u; l < 4u; ++l) {
        uint e = tid + l * 256u;
        uint am = a_k_fast ? e / BK : e % BM, ak = a_k_fast ? e % BK : e / BM;
        uint gr = row0 + am, gk = k0 + ak;
        ra[l] = (gr < M && gk < K) ? W(a[a_base + gr * a_ms + gk * a_ks]) : W(0);
        uint bn = b_n_fast ? e % BN : e / BK, bk = b_n_fast ? e / BN : e % BK;
        uint hk = k0 + bk, gc = col0 + bn;
        rb[l] = (hk < K && gc < N) ? W(b[b_base + hk * b_ks + gc * b_ns]) : W(0);
      }
    }
    if (t > 0u) {
      uint s = (t - 1u) & 1u;
      for (uint k = 0u; k < BK; ++k) {
        W av[TM], bv[TM];
        for (int p = 0; p < TM / 4; ++p) {
          W4 x = ta[s][k][ty + 16u * uint(p)], y = tb[s][k][tx + 16u * uint(p)];
          for (int i = 0; i < 4; ++i) { av[4 * p + i] = x[i]; bv[4 * p + i] = y[i]; }
        }
        for (int i = 0; i < TM; ++i) for (int j = 0; j < TM; ++j) acc[i][j] += av[i] * bv[j];
      }
    }
  }
  for (int i = 0; i < TM; ++i) {
    uint r = row0 + 64u * uint(i / 4) + ty * 4u + uint(i % 4);
    if (r >= M) continue;
    for (int j = 0; j < TM; ++j) {
      uint col = col0 + 64u * uint(j / 4) + tx * 4u + uint(j % 4);
      if (col < N) c[(batch * M + r) * N + col] = T(acc[i][j]);
    }
  }
}
