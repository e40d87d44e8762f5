#version 450
// Batched GEMM: c[b][m][n] = sum_k a[b][m][k] * b[b][k][n], with both operands read through
// strides (so transposed operands need no copy); c is contiguous [batch][M][N].
// 16x16 output tile per workgroup, K walked in 16-wide tiles through shared memory.
// Defines: T storage type, W accumulator (wrapping integer type for integers).
// Dispatch: (ceil(N/16), ceil(M/16), batch). Bindings: 0 a (read), 1 b (read), 2 c (write).
// Push: pc[0] M, pc[1] N, pc[2] K, pc[3] batch, pc[4] a offset, pc[5..8] a strides (batch, m, k),
//       pc[8] b offset, pc[9..12] b strides (batch, k, n).
#include "common.glsl"
#define TILE 16
// KSPLIT (gemm_ksplit): KSPLIT slices of 16x16 threads share each output tile, slice z walking
// the 64-wide K chunks z, z + KSPLIT, ...; then slice 0 adds the slices' sums in order z = 0,
// 1, ... For few tiles over a long K on GPUs (the MNIST step's 32x784x128 makes 16 workgroups
// that walk 49 K tiles one after another, each a global-load latency), where it cuts the walk
// 16 times (4 slices, 4 times wider steps) without a second dispatch. The order depends only on the shape.
#ifndef KSPLIT
#define KSPLIT 1
#endif
layout(local_size_x = TILE, local_size_y = TILE, local_size_z = KSPLIT) in;
layout(set = 0, binding = 0) readonly buffer A { T a[]; };
layout(set = 0, binding = 1) readonly buffer B { T b[]; };
layout(set = 0, binding = 2) writeonly buffer C { T c[]; };
#if KSPLIT > 1
// Slices walk K 64 at a time: each thread loads 4 elements of each operand per step, all in
// flight together, so a step costs about one load latency for 64 products.
#define KT 64
#else
#define KT TILE
#endif
shared W ta[KSPLIT][TILE][KT + 1];
shared W tb[KSPLIT][KT][TILE + 1];
#if KSPLIT > 1
shared W partial[KSPLIT][TILE][TILE];
#endif

void main() {
  uint M = pc[0], N = pc[1], K = pc[2];
  uint batch = gl_WorkGroupID.z;
  uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y, tz = gl_LocalInvocationID.z;
  uint row = gl_WorkGroupID.y * TILE + ty;
  uint col = gl_WorkGroupID.x * TILE + tx;
  uint a_base = pc[4] + batch * pc[5];
  uint b_base = pc[8] + batch * pc[9];
  W acc = W(0);
  // Every slice runs the same number of steps (barriers in uniform control flow); steps past K
  // load zeros.
  for (uint k0 = tz * KT; k0 < K + tz * KT; k0 += KSPLIT * KT) {
#if KSPLIT > 1
    for (uint j = 0u; j < KT / TILE; ++j) {
#else
    {  // no loop: lavapipe counts every loop iteration against its limit (CPU devices take this)
      uint j = 0u;
#endif
      uint ak = k0 + j * TILE + tx, bk = k0 + j * TILE + ty;
      ta[tz][ty][j * TILE + tx] = (row < M && ak < K) ? W(a[a_base + row * pc[6] + ak * pc[7]]) : W(0);
      tb[tz][j * TILE + ty][tx] = (bk < K && col < N) ? W(b[b_base + bk * pc[10] + col * pc[11]]) : W(0);
    }
    barrier();
    for (uint k = 0; k < KT; ++k) acc += ta[tz][ty][k] * tb[tz][k][tx];
    barrier();
  }
#if KSPLIT > 1
  partial[tz][ty][tx] = acc;
  barrier();
  if (tz != 0u) return;
  acc = partial[0][ty][tx];
  for (uint z = 1u; z < KSPLIT; ++z) acc += partial[z][ty][tx];
#endif
  if (row < M && col < N) c[(batch * M + row) * N + col] = T(acc);
}
