#version 450
// Batched GEMM for large M and N, register-blocked: a workgroup of 16 x NTY threads owns a
// BM x BN block of c (BM = NTY TM, BN = 16 TN), each thread a TM x TN sub-block made of 4x4
// pieces 4 NTY rows and 64 columns apart (rows ty*4 + 4 NTY p + i, columns tx*4 + 64 q + j), so
// each thread reads its operands from shared memory as whole vec4s and stores runs of 4
// columns. K is staged through shared memory BK at a time in two buffers: the next tile's global
// loads are issued before the current tile's arithmetic, and one barrier per tile suffices (a
// buffer is written only after every thread has passed the barrier that ended its last use).
// Each output accumulates a[k] b[k] for k = 0, 1, ... in order from +0 (padding adds +0
// products, which change nothing), the same sequence as gemm.comp.
// Defines as gemm.comp, plus TM (rows per thread: 4 gives 64x64 blocks with BK 16, 8 gives
// 128x128 with BK 8, each thread loading 4 elements of each operand per tile), and optionally
// TN (columns per thread, default TM), NTY (thread rows, default 16) and BK: TM 8, TN 4, NTY 8,
// BK 16 is a 64x64 block of 128 threads, each loading 8 elements of each operand per tile.
// Only for 32-bit accumulators W.
// Bindings and push constants as gemm.comp. Dispatch: (ceil(N/BN), ceil(M/BM), batch).
//
// With CONV defined, the same kernel is a 2-D convolution as an implicit GEMM (no padded copy,
// no im2col patches, no output transpose): per feature group (batch = group), c^T = w . P^T
// where w is the group's [M = features][K = (kh, kw, c)] weights (a, contiguous), P the
// patches of the NCHW input b, read in place (a column is an output pixel (n, oh, ow), a row of
// K an input element; padding and strides are bounds and index arithmetic), and the result is
// stored straight into NCHW. Per output the products are summed in the order of K from +0, as
// the GEMM of im2col patches laid out in that order would. Push constants beyond gemm.comp's
// (pc[9..11] unused): pc[12] channels per group CG, pc[13] KW, pc[14] OW, pc[15] OH * OW,
// pc[16] H, pc[17] W, pc[18..19] strides, pc[20..21] padding before (signed), pc[22..23]
// kernel dilation, pc[24] input batch stride (C H W), pc[25] input channel stride (H W),
// pc[26] output features F (all groups).
#include "common.glsl"
#ifndef TN
#define TN TM
#endif
#ifndef NTY
#define NTY 16
#endif
#ifndef BK
#define BK (64 / TM)
#endif
#define NT (16 * NTY)
#define BM (NTY * TM)
#define BN (16 * TN)
#define BM4 (BM / 4)
#define BN4 (BN / 4)
// Elements of each operand's tile every thread loads.
#define LA (BK * BM / NT)
#define LB (BK * BN / NT)
#if defined(IS_INT) && defined(IS_SIGNED)
#define W4 ivec4
#elif defined(IS_INT)
#define W4 uvec4
#else
#define W4 vec4
#endif
layout(local_size_x = 16, local_size_y = NTY) in;
layout(set = 0, binding = 0) readonly buffer A { T a[]; };
layout(set = 0, binding = 1) readonly buffer B { T b[]; };
#ifndef EPILOGUE  // the fused GEMM (fuse.rs) stores through its epilogue
layout(set = 0, binding = 2) writeonly buffer C { T c[]; };
#endif
// [buffer][k][m / 4], one vec4 of padding per row: column-wise stores of a k-fastest tile then
// spread over all banks instead of hitting BK-way conflicts.
shared W4 ta[2][BK][BM4 + 1];
shared W4 tb[2][BK][BN4 + 1];

void main() {
#ifdef EPILOGUE
  epilogue_init();
#endif
  uint M = pc[0], N = pc[1], K = pc[2];
  uint batch = gl_WorkGroupID.z;
  uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y, tid = ty * 16u + tx;
  uint row0 = gl_WorkGroupID.y * BM, col0 = gl_WorkGroupID.x * BN;
  uint a_base = pc[4] + batch * pc[5], a_ms = pc[6], a_ks = pc[7];
  uint b_base = pc[8] + batch * pc[9], b_ks = pc[10], b_ns = pc[11];
  // Which index runs fastest across threads in the tile loads: the operand's unit-stride one, so
  // plain and transposed operands both load in coalesced runs (a uniform branch).
  bool a_k_fast = a_ks == 1u, b_n_fast = b_ns == 1u || b_ks != 1u;
#ifdef CONV
  b_n_fast = true;
  // This thread's column of P is the same in every tile (bn = tid % BN): decode it once.
  uint CG = pc[12], KW = pc[13], OW = pc[14], OHW = pc[15], H = pc[16], WI = pc[17];
  uint s_c = pc[25];
  uint my_col = col0 + tid % BN;
  bool col_ok = my_col < N;
  uint pn = my_col / OHW, po = my_col - pn * OHW, poh = po / OW, pow_ = po - poh * OW;
  int ih0 = int(poh * pc[18]) - int(pc[20]), iw0 = int(pow_ * pc[19]) - int(pc[21]);
  uint in_base = pc[8] + batch * CG * s_c + pn * pc[24];
  // K = (kh, kw, c). When CG is a multiple of BK (every layer but a first one on RGB), a tile's
  // K values share (kh, kw) and run through consecutive channels from tile_c: three uniform
  // counters per tile. Otherwise each element divides (a uniform branch). A first version that
  // walked K per load slot (arrays of counters, a loop per load) ran 2x slower than im2col on
  // the H200 (3aa58b9).
  bool aligned = CG % uint(BK) == 0u;
  uint tile_c = 0u, tile_kw = 0u, tile_kh = 0u;
#endif

  W acc[TM][TN];
  for (int i = 0; i < TM; ++i) for (int j = 0; j < TN; ++j) acc[i][j] = W(0);
  W ra[LA], rb[LB];

  uint tiles = (K + BK - 1u) / BK;
  for (uint t = 0u; t <= tiles; ++t) {
    // Stage tile t - 1 (loaded into registers last time) into buffer (t - 1) & 1.
    if (t > 0u) {
      uint s = (t - 1u) & 1u;
      for (uint l = 0u; l < LA; ++l) {
        uint e = tid + l * NT;
        uint am = a_k_fast ? e / BK : e % BM, ak = a_k_fast ? e % BK : e / BM;
        ta[s][ak][am >> 2][am & 3u] = ra[l];
      }
      for (uint l = 0u; l < LB; ++l) {
        uint e = tid + l * NT;
        uint bn = b_n_fast ? e % BN : e / BK, bk = b_n_fast ? e / BN : e % BK;
        tb[s][bk][bn >> 2][bn & 3u] = rb[l];
      }
      barrier();
    }
    // Issue tile t's global loads before computing on tile t - 1.
    if (t < tiles) {
      uint k0 = t * BK;
      for (uint l = 0u; l < LA; ++l) {
        uint e = tid + l * NT;
        uint am = a_k_fast ? e / BK : e % BM, ak = a_k_fast ? e % BK : e / BM;
        uint gr = row0 + am, gk = k0 + ak;
        ra[l] = (gr < M && gk < K) ? W(a[a_base + gr * a_ms + gk * a_ks]) : W(0);
      }
      for (uint l = 0u; l < LB; ++l) {
        uint e = tid + l * NT;
        uint bn = b_n_fast ? e % BN : e / BK, bk = b_n_fast ? e / BN : e % BK;
        uint hk = k0 + bk, gc = col0 + bn;
#ifdef CONV
        uint ch = tile_c + bk, kwi = tile_kw, khi = tile_kh;
        if (!aligned) { uint khw = hk / CG; ch = hk - khw * CG; khi = khw / KW; kwi = khw - khi * KW; }
        int ih = ih0 + int(khi * pc[22]), iw = iw0 + int(kwi * pc[23]);
        bool inside = col_ok && hk < K && uint(ih) < H && uint(iw) < WI;
        rb[l] = inside ? W(b[in_base + ch * s_c + uint(ih) * WI + uint(iw)]) : W(0);
#else
        rb[l] = (hk < K && gc < N) ? W(b[b_base + hk * b_ks + gc * b_ns]) : W(0);
#endif
      }
#ifdef CONV
      tile_c += BK;
      if (tile_c == CG) { tile_c = 0u; if (++tile_kw == KW) { tile_kw = 0u; ++tile_kh; } }
#endif
    }
    if (t > 0u) {
      uint s = (t - 1u) & 1u;
      for (uint k = 0u; k < BK; ++k) {
        W av[TM], bv[TN];
        for (int p = 0; p < TM / 4; ++p) {
          W4 x = ta[s][k][ty + NTY * uint(p)];
          for (int i = 0; i < 4; ++i) av[4 * p + i] = x[i];
        }
        for (int q = 0; q < TN / 4; ++q) {
          W4 y = tb[s][k][tx + 16u * uint(q)];
          for (int j = 0; j < 4; ++j) bv[4 * q + j] = y[j];
        }
        for (int i = 0; i < TM; ++i) for (int j = 0; j < TN; ++j) acc[i][j] += av[i] * bv[j];
      }
    }
  }
#ifdef CONV
  // Column (n, o) of group `batch`'s feature r goes to NCHW's (n, batch M + r, o).
  uint F = pc[26];
  for (int j = 0; j < TN; ++j) {
    uint col = col0 + 64u * uint(j / 4) + tx * 4u + uint(j % 4);
    if (col >= N) continue;
    uint n = col / OHW, out_base = n * F * OHW + col - n * OHW;
    for (int i = 0; i < TM; ++i) {
      uint r = row0 + 4u * NTY * uint(i / 4) + ty * 4u + uint(i % 4);
      if (r < M) STORE_C(out_base + (batch * M + r) * OHW, acc[i][j]);
    }
  }
#else
  for (int i = 0; i < TM; ++i) {
    uint r = row0 + 4u * NTY * uint(i / 4) + ty * 4u + uint(i % 4);
    if (r >= M) continue;
    for (int j = 0; j < TN; ++j) {
      uint col = col0 + 64u * uint(j / 4) + tx * 4u + uint(j % 4);
      if (col < N) STORE_C((batch * M + r) * N + col, acc[i][j]);
    }
  }
#endif
}
