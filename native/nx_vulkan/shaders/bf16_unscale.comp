#version 450
// The bf16 results of a bf16 GEMM on the f16 tensor cores (ops/matmul.rs bf16_tensor_cores) from
// gemm_coop.comp's F32_OUT sums of the scaled operands: each output times 2^-(its A row's scale +
// its B column's), truncated to bf16 as Nx casts. Outputs of a wide line come out as anything;
// gemm_bf16_fixup.comp, after this, writes them.
// 8 outputs per invocation (two 16-byte loads and one store where a row holds them whole), over a
// 2-D grid (common.glsl's element_index).
// Bindings: 0 sums (f32, [batch][M][N]), 1 ctl (bf16_scale.comp's line words), 2 out (bf16 bits).
// Push: pc[0] M, pc[1] N, pc[3] batch (gemm.comp's slots).
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) readonly buffer S { float sums[]; };
layout(set = 0, binding = 0) readonly buffer S4 { uvec4 sums4[]; };
layout(set = 0, binding = 1) readonly buffer Ctl { int ctl[]; };
layout(set = 0, binding = 2) writeonly buffer Out { uint16_t out_[]; };
layout(set = 0, binding = 2) writeonly buffer Out8 { uvec4 out8[]; };
#include "bf16.glsl"

void main() {
  uint M = pc[0], N = pc[1], batch = pc[3];
  uint per_row = (N + 7u) / 8u;
  uint v = element_index();
  if (v >= batch * M * per_row) return;
  uint row = v / per_row, col = (v % per_row) * 8u;
  uint bt = row / M;
  int sa = BF16_LINE_SCALE(ctl, row);
  uint b_lines = batch * M + bt * N;
  uint o = row * N + col;
  bool whole = col + 8u <= N && N % 4u == 0u;
  uvec4 v0 = uvec4(0u), v1 = uvec4(0u);
  if (whole) {
    v0 = sums4[o / 4u];
    v1 = sums4[o / 4u + 1u];
  }
  uvec4 packed = uvec4(0u);
  [[unroll]] for (uint q = 0u; q < 8u; ++q) {
    if (col + q < N) {
      float x = whole ? uintBitsToFloat(q < 4u ? v0[q] : v1[q - 4u]) : sums[o + q];
      int sb = BF16_LINE_SCALE(ctl, b_lines + col + q);
      bool wide = sa == BF16_WIDE || sb == BF16_WIDE;
      uint h = wide ? 0u : float_to_bf16(bf16_unscale(x, -(sa + sb)));
      packed[q / 2u] |= h << (16u * (q % 2u));
    }
  }
  if (whole && N % 8u == 0u) {
    out8[o / 8u] = packed;
  } else {
    [[unroll]] for (uint q = 0u; q < 8u; ++q)
      if (col + q < N) out_[o + q] = uint16_t((packed[q / 2u] >> (16u * (q % 2u))) & 0xffffu);
  }
}
