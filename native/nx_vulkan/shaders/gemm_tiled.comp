#version 450
// Batched GEMM for large M and N, register-blocked: a workgroup of 16x16 threads owns a 64x64
// block of c, each thread a 4x4 sub-block (rows ty + 16 i, columns tx + 16 j, so stores stay
// coalesced), with K staged through shared memory 16 at a time. Each output accumulates
// a[k] b[k] for k = 0, 1, ... in 16-wide steps, zero-padded: the same sequence as gemm.comp, so
// both kernels give the same results.
// Defines, bindings and push constants as gemm.comp. Dispatch: (ceil(N/64), ceil(M/64), batch).
#include "common.glsl"
#define BM 64
#define BN 64
#define BK 16
layout(local_size_x = 16, local_size_y = 16) in;
layout(set = 0, binding = 0) readonly buffer A { T a[]; };
layout(set = 0, binding = 1) readonly buffer B { T b[]; };
layout(set = 0, binding = 2) writeonly buffer C { T c[]; };
shared W ta[BK][BM];
shared W tb[BK][BN];

void main() {
  uint M = pc[0], N = pc[1], K = pc[2];
  uint batch = gl_WorkGroupID.z;
  uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y, tid = ty * 16u + tx;
  uint row0 = gl_WorkGroupID.y * BM, col0 = gl_WorkGroupID.x * BN;
  uint a_base = pc[4] + batch * pc[5];
  uint b_base = pc[8] + batch * pc[9];
  W acc[4][4];
  for (int i = 0; i < 4; ++i) for (int j = 0; j < 4; ++j) acc[i][j] = W(0);
  for (uint k0 = 0; k0 < K; k0 += BK) {
    for (uint l = 0; l < 4u; ++l) {
      uint e = tid + l * 256u;
      uint am = e / BK, ak = e % BK;          // A tile: 64 rows x 16 k, k fastest
      uint gr = row0 + am, gk = k0 + ak;
      ta[ak][am] = (gr < M && gk < K) ? W(a[a_base + gr * pc[6] + gk * pc[7]]) : W(0);
      uint bk = e / BN, bn = e % BN;          // B tile: 16 k x 64 columns, columns fastest
      uint hk = k0 + bk, gc = col0 + bn;
      tb[bk][bn] = (hk < K && gc < N) ? W(b[b_base + hk * pc[10] + gc * pc[11]]) : W(0);
    }
    barrier();
    for (uint k = 0; k < BK; ++k) {
      W av[4], bv[4];
      for (int i = 0; i < 4; ++i) av[i] = ta[k][ty + 16u * uint(i)];
      for (int j = 0; j < 4; ++j) bv[j] = tb[k][tx + 16u * uint(j)];
      for (int i = 0; i < 4; ++i) for (int j = 0; j < 4; ++j) acc[i][j] += av[i] * bv[j];
    }
    barrier();
  }
  for (int i = 0; i < 4; ++i) {
    uint r = row0 + ty + 16u * uint(i);
    if (r >= M) continue;
    for (int j = 0; j < 4; ++j) {
      uint col = col0 + tx + 16u * uint(j);
      if (col < N) c[(batch * M + r) * N + col] = T(acc[i][j]);
    }
  }
}
