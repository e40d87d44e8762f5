#version 450
// Batched GEMM: c[b][m][n] = sum_k a[b][m][k] * b[b][k][n], with both operands read through
// strides (so transposed operands need no copy); c is contiguous [batch][M][N].
// TILE x TILE output tile per workgroup (16x16; gemm_ksplit 8x8), K walked in KT-wide tiles
// through shared memory.
// Defines: T storage type, W accumulator (wrapping integer type for integers).
// Dispatch: (ceil(N/TILE), ceil(M/TILE), batch). Bindings: 0 a (read), 1 b (read), 2 c (write).
// Push: pc[0] M, pc[1] N, pc[2] K, pc[3] batch, pc[4] a offset, pc[5..8] a strides (batch, m, k),
//       pc[8] b offset, pc[9..12] b strides (batch, k, n).
#include "common.glsl"
// KSPLIT (gemm_ksplit, with TILE 8 and KT 32): KSPLIT slices of TILE x TILE threads share each
// output tile, slice z walking the KT-wide K chunks z, z + KSPLIT, ...; then slice 0 adds the
// slices' sums in order z = 0, 1, ... For few tiles over a long K on GPUs: the MNIST step's
// 32x784x128 made 16 workgroups of 16x16 outputs that walked all of K, one output per thread,
// bound by each multiprocessor's shared-memory reads (15-21 us on the H200); 8x8 tiles in 16
// slices spread the same work over 4x the multiprocessors, without a second dispatch. The order
// depends only on the shape.
#ifndef KSPLIT
#define KSPLIT 1
#endif
#ifndef TILE
#define TILE 16
#endif
#ifndef KT
#define KT TILE
#endif
layout(local_size_x = TILE, local_size_y = TILE, local_size_z = KSPLIT) in;
layout(set = 0, binding = 0) readonly buffer A { T a[]; };
layout(set = 0, binding = 1) readonly buffer B { T b[]; };
#ifndef EPILOGUE  // the fused GEMM (fuse.rs) stores through its epilogue
layout(set = 0, binding = 2) writeonly buffer C { T c[]; };
#endif
shared W ta[KSPLIT][TILE][KT + 1];
shared W tb[KSPLIT][KT][TILE + 1];
#if KSPLIT > 1
shared W partial[KSPLIT][TILE][TILE];
#endif

void main() {
#ifdef EPILOGUE
  epilogue_init();
#endif
  uint M = pc[0], N = pc[1], K = pc[2];
  uint batch = gl_WorkGroupID.z;
  uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y, tz = gl_LocalInvocationID.z;
  uint row0 = gl_WorkGroupID.y * TILE, col0 = gl_WorkGroupID.x * TILE;
  uint row = row0 + ty, col = col0 + tx;
  uint a_base = pc[4] + batch * pc[5];
  uint b_base = pc[8] + batch * pc[9];
  W acc = W(0);
  // Every slice runs the same number of steps (barriers in uniform control flow); steps past K
  // load zeros. Each thread loads KT / TILE elements of each operand's chunk per step (with
  // TILE = KT: A's (ty, tx) and B's (ty, tx), as one output per thread reads them).
  for (uint k0 = tz * KT; k0 < K + tz * KT; k0 += KSPLIT * KT) {
#if KT > TILE
    for (uint j = 0u; j < KT / TILE; ++j) {
#else
    {  // no loop: lavapipe counts every loop iteration against its limit (CPU devices take this)
      uint j = 0u;
#endif
      uint e = ty * TILE + tx + j * TILE * TILE;
      uint ar = e / KT, ak = e % KT, bk = e / TILE, bc = e % TILE;
      uint ka = k0 + ak, kb = k0 + bk;
      ta[tz][ar][ak] = (row0 + ar < M && ka < K) ? W(a[a_base + (row0 + ar) * pc[6] + ka * pc[7]]) : W(0);
      tb[tz][bk][bc] = (kb < K && col0 + bc < N) ? W(b[b_base + kb * pc[10] + (col0 + bc) * pc[11]]) : W(0);
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
  if (row < M && col < N) STORE_C((batch * M + row) * N + col, acc);
}
