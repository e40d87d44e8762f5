#version 450
// Batched f16 GEMM on tensor cores through cooperative matrices (GL_NV_cooperative_matrix; the
// Khronos extension needs a newer glslang than Debian's; the module uses the Vulkan memory
// model, a device feature context.rs enables with the extension): f16 operands, f32 accumulation, the
// f16 result rounded once from the f32 sum. A workgroup of 8 subgroups of 32 owns a 128x128 block
// of c; subgroup s owns rows 32 (s / 2) .. + 31 and columns 64 (s % 2) .. + 63, as 2 x 4
// fragments of 16x16. K goes through shared memory BK at a time: every thread loads its share
// of both tiles through the operands' strides (any layout, ragged edges zero-padded), then each
// subgroup multiplies its fragments from shared memory. Results go through a per-subgroup
// shared scratch fragment so edge blocks store only their valid part. Whole blocks of aligned
// row-major operands load their tiles 16 bytes at a time, one tile ahead, and store them to
// shared memory 16 bytes at a time (H200: 4096^3 1074 -> 958 us against 2-byte stores).
// The sum's order is the tensor cores', not gemm.comp's sequence: deterministic on one device.
// Bindings and push constants as gemm.comp (T is float16_t). Dispatch: (ceil(N/128),
// ceil(M/128), batch); needs a subgroup size of 32.
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#include "common.glsl"
#define BM 128
#define BN 128
#define BK 32
// Row strides of the shared tiles, in elements: multiples of 8 halves (16 bytes), as
// cooperative-matrix loads want, and off the 128-byte period so rows spread across banks.
#define AS (BK + 8)
#define BS (BN + 8)
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) readonly buffer A { T a[]; };
layout(set = 0, binding = 1) readonly buffer B { T b[]; };
layout(set = 0, binding = 2) writeonly buffer C { T c[]; };
// The operands as 16-byte vectors of 8 halves, for whole blocks of aligned row-major operands.
layout(set = 0, binding = 0) readonly buffer A8 { uvec4 a8[]; };
layout(set = 0, binding = 1) readonly buffer B8 { uvec4 b8[]; };
shared float16_t ta[BM * AS];
shared float16_t tb[BK * BS];
// The vector path's tiles, the same layouts as 16-byte vectors of 8 halves: each thread stores
// whole vectors (one store where the scalar tiles took eight), and the fragment loads count
// elements and strides in vectors.
shared uvec4 ta8[BM * AS / 8];
shared uvec4 tb8[BK * BS / 8];
shared float16_t scratch[8 * 16 * 16];

// The subgroup's 2 x 4 fragments += its rows of the shared a tile times its columns of the b tile.
void multiply_tile(uint sr, uint sc, inout fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> acc[2][4]) {
  for (uint kk = 0u; kk < BK; kk += 16u) {
    fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> fa[2], fb[4];
    for (int i = 0; i < 2; ++i) coopMatLoadNV(fa[i], ta, (sr + 16u * uint(i)) * AS + kk, AS, false);
    for (int j = 0; j < 4; ++j) coopMatLoadNV(fb[j], tb, kk * BS + sc + 16u * uint(j), BS, false);
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 4; ++j) acc[i][j] = coopMatMulAddNV(fa[i], fb[j], acc[i][j]);
  }
}

// The same from the vector tiles.
void multiply_tile8(uint sr, uint sc, inout fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> acc[2][4]) {
  for (uint kk = 0u; kk < BK; kk += 16u) {
    fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> fa[2], fb[4];
    for (int i = 0; i < 2; ++i) coopMatLoadNV(fa[i], ta8, ((sr + 16u * uint(i)) * AS + kk) / 8u, AS / 8u, false);
    for (int j = 0; j < 4; ++j) coopMatLoadNV(fb[j], tb8, (kk * BS + sc + 16u * uint(j)) / 8u, BS / 8u, false);
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 4; ++j) acc[i][j] = coopMatMulAddNV(fa[i], fb[j], acc[i][j]);
  }
}

void main() {
  uint M = pc[0], N = pc[1], K = pc[2];
  uint batch = gl_WorkGroupID.z;
  uint tid = gl_LocalInvocationID.x, sg = tid / 32u, lane = tid % 32u;
  uint row0 = gl_WorkGroupID.y * BM, col0 = gl_WorkGroupID.x * BN;
  uint a_base = pc[4] + batch * pc[5], a_ms = pc[6], a_ks = pc[7];
  uint b_base = pc[8] + batch * pc[9], b_ks = pc[10], b_ns = pc[11];
  bool a_k_fast = a_ks == 1u, b_n_fast = b_ns == 1u || b_ks != 1u;
  uint sr = (sg / 2u) * 32u, sc = (sg % 2u) * 64u;

  fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> acc[2][4];
  for (int i = 0; i < 2; ++i) for (int j = 0; j < 4; ++j) acc[i][j] = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);

  // Whole blocks of row-major operands whose rows start on 16-byte boundaries (uniform per
  // workgroup): each thread loads 2 vectors of 8 halves of each tile, the next tile's while the
  // subgroups multiply the current one (from registers into shared memory between two barriers).
  bool vectors = a_ks == 1u && b_ns == 1u && (a_ms % 8u) == 0u && (b_ks % 8u) == 0u && (a_base % 8u) == 0u &&
                 (b_base % 8u) == 0u && (K % BK) == 0u && row0 + BM <= M && col0 + BN <= N;
  if (vectors) {
    uvec4 ra[2], rb[2];
    for (uint l = 0u; l < 2u; ++l) {
      uint e = tid + l * 256u;
      ra[l] = a8[(a_base + (row0 + e / 4u) * a_ms + (e % 4u) * 8u) / 8u];
      rb[l] = b8[(b_base + (e / 16u) * b_ks + col0 + (e % 16u) * 8u) / 8u];
    }
    for (uint k0 = 0u; k0 < K; k0 += BK) {
      barrier();
      for (uint l = 0u; l < 2u; ++l) {
        uint e = tid + l * 256u;
        ta8[((e / 4u) * AS + (e % 4u) * 8u) / 8u] = ra[l];
        tb8[((e / 16u) * BS + (e % 16u) * 8u) / 8u] = rb[l];
      }
      barrier();
      if (k0 + BK < K) {
        for (uint l = 0u; l < 2u; ++l) {
          uint e = tid + l * 256u;
          ra[l] = a8[(a_base + (row0 + e / 4u) * a_ms + k0 + BK + (e % 4u) * 8u) / 8u];
          rb[l] = b8[(b_base + (k0 + BK + e / 16u) * b_ks + col0 + (e % 16u) * 8u) / 8u];
        }
      }
      multiply_tile8(sr, sc, acc);
    }
  }
  for (uint k0 = 0u; k0 < (vectors ? 0u : K); k0 += BK) {
    // 128 x 32 of a and 32 x 128 of b: 16 elements of each per thread, unit-stride index fastest.
    for (uint l = 0u; l < 16u; ++l) {
      uint e = tid + l * 256u;
      uint am = a_k_fast ? e / BK : e % BM, ak = a_k_fast ? e % BK : e / BM;
      uint gr = row0 + am, gk = k0 + ak;
      ta[am * AS + ak] = (gr < M && gk < K) ? a[a_base + gr * a_ms + gk * a_ks] : float16_t(0.0);
      uint bn = b_n_fast ? e % BN : e / BK, bk = b_n_fast ? e / BN : e % BK;
      uint hk = k0 + bk, gc = col0 + bn;
      tb[bk * BS + bn] = (hk < K && gc < N) ? b[b_base + hk * b_ks + gc * b_ns] : float16_t(0.0);
    }
    barrier();
    multiply_tile(sr, sc, acc);
    barrier();
  }

  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 4; ++j) {
      fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> h = fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>(acc[i][j]);
      coopMatStoreNV(h, scratch, sg * 256u, 16u, false);
      subgroupBarrier();
      subgroupMemoryBarrierShared();
      // 256 elements, 8 per lane: row lane / 2, columns 8 (lane % 2) ..
      uint r = row0 + sr + 16u * uint(i) + lane / 2u;
      for (uint q = 0u; q < 8u; ++q) {
        uint cc = (lane % 2u) * 8u + q;
        uint col = col0 + sc + 16u * uint(j) + cc;
        if (r < M && col < N) c[(batch * M + r) * N + col] = scratch[sg * 256u + (lane / 2u) * 16u + cc];
      }
      subgroupBarrier();
      subgroupMemoryBarrierShared();
    }
  }
}
