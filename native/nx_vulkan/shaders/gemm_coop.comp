#version 450
// Batched f16 GEMM on tensor cores through cooperative matrices (GL_NV_cooperative_matrix; the
// Khronos extension needs a newer glslang than Debian's; the module uses the Vulkan memory
// model, a device feature context.rs enables with the extension): f16 operands, f32 accumulation,
// the f16 result rounded once from the f32 sum. The sum's order is the tensor cores', not
// gemm.comp's sequence: deterministic on one device for one block shape.
//
// Block shape by specialization constant 0 (BLOCK, ops/matmul.rs coop_block picks it): 128 rows
// by 128 columns (0), by 256 columns (1), or 128x128 in two shared stages (2: one barrier per K
// step; two stages of the 256-wide block would not fit in 48 KiB). K goes 32 a step. A
// workgroup is 8 subgroups of 32; each owns FM x FN fragments of 16x16 (2 x 4 in 128x128
// blocks, 4 x 4 in 128x256 ones), kept in registers: every loop over fragments is unrolled, so
// no fragment array is indexed at run time (H200 driver statistics: 108-192 registers, no
// local memory).
//
// K goes through shared memory a step at a time: each thread fetches its share of both tiles as
// 16-byte vectors of 8 halves into registers (the next step's while the subgroups multiply the
// current one), then stores them to shared memory whole. A vector runs along its operand's unit
// stride (so transposed operands read as fast as row-major ones) and is one load where it lies
// inside the operand and the other stride and the offset are whole vectors; else its 8 halves
// are gathered through the strides (zeros past the edges). Results leave through a per-subgroup
// scratch fragment (in the A tile's memory, after the last step), 16 bytes a lane where the row
// allows.
// Bindings and push constants as gemm.comp (T is float16_t; with F32_OUT, C holds the f32
// sums). Dispatch: (ceil(N/BN), ceil(M/BM), batch); needs a subgroup size of 32.
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
layout(constant_id = 0) const uint BLOCK = 0;
const uint BN = 128u << (BLOCK & 1u);
const uint BM = 128u;
const uint BK = 32u;
const uint STAGES = 1u + ((BLOCK >> 1u) & 1u);
// Subgroups in a column of the block: 2 in 128x256 blocks (2 x 4 subgroups of 64x64), else 4.
const uint SG_ROWS = 4u >> (BLOCK & 1u);
const uint SG_COLS = 8u / SG_ROWS;
const uint FM = BM / SG_ROWS / 16u;
const uint FN = BN / SG_COLS / 16u;
// Shared tiles, in 16-byte vectors of 8 halves. An operand whose unit stride runs along K (A
// row-major, B column-major) keeps K contiguous in its tile, else the other axis, and its
// fragments load row- or column-major to match: either way global loads and shared stores move
// whole vectors and neighbouring threads take neighbouring vectors. Row strides are whole
// vectors (as fragment loads want) plus one, off the 128-byte period, so rows spread across
// banks. A as M rows of K (AK) or K rows of M (AM); B as K rows of N (BN_) or N rows of K (BK_).
const uint AK = BK / 8u + 1u;
const uint AM = BM / 8u + 1u;
const uint BN_ = BN / 8u + 1u;
const uint BK_ = BK / 8u + 1u;
// Each tile's size is its K-contiguous form's, the larger in every block.
const uint A_TILE = BM * AK;
const uint B_TILE = BN * BK_;
// Each thread's share of a tile's vectors.
const uint LA = BM * BK / 8u / 256u;
const uint LB = BK * BN / 8u / 256u;
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) readonly buffer A { T a[]; };
layout(set = 0, binding = 1) readonly buffer B { T b[]; };
layout(set = 0, binding = 0) readonly buffer A8 { uvec4 a8[]; };
layout(set = 0, binding = 1) readonly buffer B8 { uvec4 b8[]; };
#if defined(F32_OUT)
// f32 results, the tensor cores' sums as they are (bf16_unscale.comp finishes a bf16 GEMM).
layout(set = 0, binding = 2) writeonly buffer C { float c[]; };
layout(set = 0, binding = 2) writeonly buffer C8 { uvec4 c8[]; };
#else
layout(set = 0, binding = 2) writeonly buffer C { T c[]; };
layout(set = 0, binding = 2) writeonly buffer C8 { uvec4 c8[]; };
#endif
shared uvec4 ta[STAGES * A_TILE];
shared uvec4 tb[STAGES * B_TILE];

fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> acc[FM][FN];

uint M, N, K, row0, col0, a_base, a_ms, a_ks, b_base, b_ks, b_ns;
// Per operand (uniform): whether its tile keeps M (A) or N (B) contiguous instead of K, and
// whether whole vectors may be read along its unit stride (other strides and offset aligned).
bool a_mfast, b_nfast, a_vec, b_vec;

uint pack2(float16_t x, float16_t y) { return packFloat2x16(f16vec2(x, y)); }
uvec4 pack8(float16_t h[8]) {
  return uvec4(pack2(h[0], h[1]), pack2(h[2], h[3]), pack2(h[4], h[5]), pack2(h[6], h[7]));
}

// Vector e of the A tile at step k0: its tile coordinates (m, k) and its shared slot. A vector
// runs 8 along the tile's contiguous axis; where it lies wholly inside the operand and vectors
// are allowed it is one load, else 8 gathered halves (zeros outside).
uvec4 fetch_a(uint e, uint k0) {
  float16_t h[8];
  if (a_mfast) {
    uint gk = k0 + e / (BM / 8u), gr = row0 + (e % (BM / 8u)) * 8u;
    if (a_vec && gk < K && gr + 8u <= M) return a8[(a_base + gk * a_ks + gr) / 8u];
    [[unroll]] for (uint q = 0u; q < 8u; ++q)
      h[q] = (gk < K && gr + q < M) ? a[a_base + (gr + q) * a_ms + gk * a_ks] : float16_t(0.0);
  } else {
    uint gr = row0 + e / (BK / 8u), gk = k0 + (e % (BK / 8u)) * 8u;
    if (a_vec && gr < M && gk + 8u <= K) return a8[(a_base + gr * a_ms + gk) / 8u];
    [[unroll]] for (uint q = 0u; q < 8u; ++q)
      h[q] = (gr < M && gk + q < K) ? a[a_base + gr * a_ms + (gk + q) * a_ks] : float16_t(0.0);
  }
  return pack8(h);
}

uint a_slot(uint e) {
  return a_mfast ? (e / (BM / 8u)) * AM + e % (BM / 8u) : (e / (BK / 8u)) * AK + e % (BK / 8u);
}

uvec4 fetch_b(uint e, uint k0) {
  float16_t h[8];
  if (b_nfast) {
    uint hk = k0 + e / (BN / 8u), gc = col0 + (e % (BN / 8u)) * 8u;
    if (b_vec && hk < K && gc + 8u <= N) return b8[(b_base + hk * b_ks + gc) / 8u];
    [[unroll]] for (uint q = 0u; q < 8u; ++q)
      h[q] = (hk < K && gc + q < N) ? b[b_base + hk * b_ks + (gc + q) * b_ns] : float16_t(0.0);
  } else {
    uint gc = col0 + e / (BK / 8u), hk = k0 + (e % (BK / 8u)) * 8u;
    if (b_vec && gc < N && hk + 8u <= K) return b8[(b_base + gc * b_ns + hk) / 8u];
    [[unroll]] for (uint q = 0u; q < 8u; ++q)
      h[q] = (gc < N && hk + q < K) ? b[b_base + (hk + q) * b_ks + gc * b_ns] : float16_t(0.0);
  }
  return pack8(h);
}

uint b_slot(uint e) {
  return b_nfast ? (e / (BN / 8u)) * BN_ + e % (BN / 8u) : (e / (BK / 8u)) * BK_ + e % (BK / 8u);
}

void fetch(uint tid, uint k0, out uvec4 ra[LA], out uvec4 rb[LB]) {
  [[unroll]] for (uint l = 0u; l < LA; ++l) ra[l] = fetch_a(tid + l * 256u, k0);
  [[unroll]] for (uint l = 0u; l < LB; ++l) rb[l] = fetch_b(tid + l * 256u, k0);
}

void store(uint tid, uint stage, uvec4 ra[LA], uvec4 rb[LB]) {
  [[unroll]] for (uint l = 0u; l < LA; ++l) ta[stage * A_TILE + a_slot(tid + l * 256u)] = ra[l];
  [[unroll]] for (uint l = 0u; l < LB; ++l) tb[stage * B_TILE + b_slot(tid + l * 256u)] = rb[l];
}

// The subgroup's fragments += its rows of the stage's A tile times its columns of its B tile.
void multiply(uint stage, uint sr, uint sc) {
  [[unroll]] for (uint kk = 0u; kk < BK; kk += 16u) {
    fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> fa[FM];
    [[unroll]] for (uint i = 0u; i < FM; ++i) {
      if (a_mfast)
        coopMatLoadNV(fa[i], ta, stage * A_TILE + kk * AM + (sr + 16u * i) / 8u, AM, true);
      else
        coopMatLoadNV(fa[i], ta, stage * A_TILE + (sr + 16u * i) * AK + kk / 8u, AK, false);
    }
    [[unroll]] for (uint j = 0u; j < FN; ++j) {
      fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> fb;
      if (b_nfast)
        coopMatLoadNV(fb, tb, stage * B_TILE + kk * BN_ + (sc + 16u * j) / 8u, BN_, false);
      else
        coopMatLoadNV(fb, tb, stage * B_TILE + (sc + 16u * j) * BK_ + kk / 8u, BK_, true);
      [[unroll]] for (uint i = 0u; i < FM; ++i) acc[i][j] = coopMatMulAddNV(fa[i], fb, acc[i][j]);
    }
  }
}

void main() {
  M = pc[0];
  N = pc[1];
  K = pc[2];
  uint batch = gl_WorkGroupID.z;
  uint tid = gl_LocalInvocationID.x, sg = tid / 32u, lane = tid % 32u;
  row0 = gl_WorkGroupID.y * BM;
  col0 = gl_WorkGroupID.x * BN;
  a_base = pc[4] + batch * pc[5];
  a_ms = pc[6];
  a_ks = pc[7];
  b_base = pc[8] + batch * pc[9];
  b_ks = pc[10];
  b_ns = pc[11];
  // M contiguous where that is A's unit stride (a transposed operand), else K; N where that is
  // B's, else K. Vectors where the other stride and the offset are whole vectors.
  a_mfast = a_ms == 1u && a_ks != 1u;
  b_nfast = !(b_ks == 1u && b_ns != 1u);
  a_vec = (a_mfast ? a_ks : a_ms) % 8u == 0u && (a_mfast || a_ks == 1u) && a_base % 8u == 0u;
  b_vec = (b_nfast ? b_ks : b_ns) % 8u == 0u && (!b_nfast || b_ns == 1u) && b_base % 8u == 0u;
  uint sr = (sg / SG_COLS) * (16u * FM), sc = (sg % SG_COLS) * (16u * FN);

  [[unroll]] for (uint i = 0u; i < FM; ++i)
    [[unroll]] for (uint j = 0u; j < FN; ++j) acc[i][j] = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);

  uvec4 ra[LA], rb[LB];
  if (K > 0u) fetch(tid, 0u, ra, rb);
  if (STAGES == 2u) {
    // Stage s is multiplied while the next step's vectors go to stage s ^ 1, which the barrier
    // closing the previous step freed.
    if (K > 0u) store(tid, 0u, ra, rb);
    barrier();
    uint stage = 0u;
    for (uint k0 = 0u; k0 < K; k0 += BK) {
      bool more = k0 + BK < K;
      if (more) fetch(tid, k0 + BK, ra, rb);
      multiply(stage, sr, sc);
      if (more) store(tid, stage ^ 1u, ra, rb);
      barrier();
      stage ^= 1u;
    }
  } else {
    for (uint k0 = 0u; k0 < K; k0 += BK) {
      barrier();
      store(tid, 0u, ra, rb);
      barrier();
      if (k0 + BK < K) fetch(tid, k0 + BK, ra, rb);
      multiply(0u, sr, sc);
    }
    barrier();
  }

#if defined(F32_OUT)
  // Scratch: 64 vectors (one 16x16 f32 fragment, 4 vectors a row) per subgroup in the A tile's
  // memory (512 of its 640), free after the barrier above. Lane l takes row l / 2, columns
  // 8 (l % 2) .. + 7: two vectors.
  uint scratch = sg * 64u;
  [[unroll]] for (uint i = 0u; i < FM; ++i) {
    [[unroll]] for (uint j = 0u; j < FN; ++j) {
      coopMatStoreNV(acc[i][j], ta, scratch, 4u, false);
      subgroupMemoryBarrierShared();
      subgroupBarrier();
      uvec4 v0 = ta[scratch + (lane / 2u) * 4u + (lane % 2u) * 2u];
      uvec4 v1 = ta[scratch + (lane / 2u) * 4u + (lane % 2u) * 2u + 1u];
      uint r = row0 + sr + 16u * i + lane / 2u;
      uint col = col0 + sc + 16u * j + (lane % 2u) * 8u;
      uint o = (batch * M + r) * N + col;
      if (r < M) {
        if (col + 8u <= N && (o % 4u) == 0u) {
          c8[o / 4u] = v0;
          c8[o / 4u + 1u] = v1;
        } else {
          [[unroll]] for (uint q = 0u; q < 8u; ++q)
            if (col + q < N) c[o + q] = uintBitsToFloat(q < 4u ? v0[q] : v1[q - 4u]);
        }
      }
      subgroupMemoryBarrierShared();
      subgroupBarrier();
    }
  }
#else
  // Scratch: 32 vectors (one 16x16 f16 fragment) per subgroup in the A tile's memory, free after
  // the barrier above. Lane l holds row l / 2, columns 8 (l % 2) .. + 7: one vector.
  uint scratch = sg * 32u;
  [[unroll]] for (uint i = 0u; i < FM; ++i) {
    [[unroll]] for (uint j = 0u; j < FN; ++j) {
      fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> h = fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>(acc[i][j]);
      coopMatStoreNV(h, ta, scratch, 2u, false);
      subgroupMemoryBarrierShared();
      subgroupBarrier();
      uvec4 v = ta[scratch + lane];
      uint r = row0 + sr + 16u * i + lane / 2u;
      uint col = col0 + sc + 16u * j + (lane % 2u) * 8u;
      uint o = (batch * M + r) * N + col;
      if (r < M) {
        if (col + 8u <= N && (o % 8u) == 0u) {
          c8[o / 8u] = v;
        } else {
          [[unroll]] for (uint q = 0u; q < 8u; ++q)
            if (col + q < N) c[o + q] = unpackFloat2x16(v[q / 2u])[q % 2u];
        }
      }
      subgroupMemoryBarrierShared();
      subgroupBarrier();
    }
  }
#endif
}
