#version 450
// A bf16 GEMM operand as an f16 copy scaled by a power of two per line, for the f16 tensor cores
// (ops/matmul.rs bf16_gemm): the operand is read as [batch, L, K] through strides, a line being
// one row of A (L = M) or one column of B (L = N), the K elements one output's sum takes from it.
// A line is scaled by 2^s so that its largest magnitude lands in [2^15, 2^16) (bf16's largest
// significand times 2^15 is 65280, below f16's 65504). Every bf16 value (8 significant bits) of
// the line that is zero or within 29 binades of that largest one is then a normal f16, exactly,
// and the copy is made by moving bits, with no float arithmetic a GPU could flush. A line holding
// a NaN, an infinity, a bf16 subnormal or a nonzero value further down is "wide": its scale reads
// WIDE, ctl[0] gets bit 0, and gemm_bf16_fixup.comp computes its outputs from the bf16 values.
//
// Specialization constant 0 (LFAST) picks the walk: 0, one workgroup per line, its invocations
// along K (K the unit stride, as A row-major), the copy written [batch][L][K]; 1, one workgroup
// per 32 lines, lanes along the lines and 8 phases along K (the lines the unit stride, as B
// row-major), the copy written [batch][K][L]. Workgroups: a 2-D grid over lines (LFAST 0) or
// groups of 32 lines (LFAST 1), times the batch.
// Bindings: 0 x (bf16 bits), 1 y (f16 bits), 2 ctl (int: ctl[0] the wide flag, read and set by
// atomics; the scales at ctl[pc[7] + b * L + l]).
// Push: pc[0] L, pc[1] K, pc[2] batch, pc[3] x offset, pc[4..6] x strides (batch, line, K),
// pc[7] the first scale's index in ctl.
#include "common.glsl"
layout(constant_id = 0) const uint LFAST = 0;
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) readonly buffer X { uint16_t x[]; };
layout(set = 0, binding = 1) writeonly buffer Y { uint16_t y[]; };
layout(set = 0, binding = 2) buffer Ctl { int ctl[]; };
#include "bf16.glsl"

// Per line (32 in LFAST 1): the largest magnitude's bits and the smallest nonzero one's.
shared uint line_max[32], line_min[32];

void main() {
  uint L = pc[0], K = pc[1], batch = pc[2], x0 = pc[3];
  int bs = int(pc[4]), ls = int(pc[5]), ks = int(pc[6]);
  uint tid = gl_LocalInvocationID.x;
  uint group = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  uint per_batch = LFAST == 0u ? L : (L + 31u) / 32u;
  if (group >= per_batch * batch) return;
  uint b = group / per_batch;
  uint slot = LFAST == 0u ? 0u : tid % 32u;
  uint l = LFAST == 0u ? group % per_batch : (group % per_batch) * 32u + slot;
  uint k_first = LFAST == 0u ? tid : tid / 32u;
  uint k_step = LFAST == 0u ? 256u : 8u;
  bool live = l < L;
  if (tid < 32u) {
    line_max[tid] = 0u;
    line_min[tid] = 0xffffu;
  }
  barrier();
  int base = int(x0) + int(b) * bs + int(l) * ls;
  uint hi = 0u, lo = 0xffffu;
  if (live) {
    for (uint k = k_first; k < K; k += k_step) {
      uint m = uint(x[base + int(k) * ks]) & 0x7fffu;
      hi = max(hi, m);
      if (m != 0u) lo = min(lo, m);
    }
  }
  atomicMax(line_max[slot], hi);
  atomicMin(line_min[slot], lo);
  barrier();
  int s = bf16_line_scale(line_max[slot], line_min[slot]);
  if (!live) return;
  if (s == BF16_WIDE) {
    if (k_first == 0u) {
      ctl[pc[7] + b * L + l] = BF16_WIDE;
      atomicOr(ctl[0], 1);
    }
    return;
  }
  if (k_first == 0u) ctl[pc[7] + b * L + l] = s;
  uint out0 = LFAST == 0u ? (b * L + l) * K : b * K * L + l;
  uint out_step = LFAST == 0u ? 1u : L;
  for (uint k = k_first; k < K; k += k_step)
    y[out0 + k * out_step] = uint16_t(bf16_to_f16_scaled(uint(x[base + int(k) * ks]), s));
}
