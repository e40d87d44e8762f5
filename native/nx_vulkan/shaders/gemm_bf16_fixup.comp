#version 450
// The outputs of a bf16 GEMM on the f16 tensor cores (ops/matmul.rs bf16_tensor_cores) that
// bf16_unscale.comp could not give: those of a wide row of A or a wide column of B
// (bf16_scale.comp), each an f32 sum over K in order from the bf16 values, truncated to bf16 as Nx
// casts. With no wide line (ctl[0] == 0) every workgroup returns at once.
// Workgroups: a 2-D grid over the batch's rows (batch x M), 256 invocations along N.
// Bindings: 0 a, 1 b (bf16 bits, the GEMM's operands), 2 ctl (bf16_scale.comp's wide flag and line
// words), 3 c (bf16 bits, [batch][M][N]).
// Push: as gemm.comp: pc[0] M, pc[1] N, pc[2] K, pc[3] batch, pc[4] a offset, pc[5..7] a strides
// (batch, m, k), pc[8] b offset, pc[9..11] b strides (batch, k, n).
#include "common.glsl"
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) readonly buffer A { uint16_t a[]; };
layout(set = 0, binding = 1) readonly buffer B { uint16_t b[]; };
layout(set = 0, binding = 2) readonly buffer Ctl { int ctl[]; };
layout(set = 0, binding = 3) writeonly buffer C { uint16_t c[]; };
#include "bf16.glsl"

void main() {
  if (ctl[0] == 0) return;
  uint M = pc[0], N = pc[1], K = pc[2], batch = pc[3];
  uint row = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  if (row >= batch * M) return;
  uint bt = row / M, m = row % M;
  bool wide_row = BF16_LINE_SCALE(ctl, row) == BF16_WIDE;
  uint b_lines = batch * M + bt * N;
  int a0 = int(pc[4]) + int(bt) * int(pc[5]) + int(m) * int(pc[6]), aks = int(pc[7]);
  int b0 = int(pc[8]) + int(bt) * int(pc[9]), bks = int(pc[10]), bns = int(pc[11]);
  for (uint n = gl_LocalInvocationID.x; n < N; n += 256u) {
    if (!wide_row && BF16_LINE_SCALE(ctl, b_lines + n) != BF16_WIDE) continue;
    float acc = 0.0;
    int bn = b0 + int(n) * bns;
    for (uint k = 0u; k < K; ++k)
      acc = fma(bf16_to_float(uint(a[a0 + int(k) * aks])), bf16_to_float(uint(b[bn + int(k) * bks])), acc);
    c[row * N + n] = uint16_t(float_to_bf16(acc));
  }
}
