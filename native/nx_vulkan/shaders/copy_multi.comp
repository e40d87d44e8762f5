#version 450
// Up to 8 whole-buffer copies in one dispatch: dst_p[i] = src_p[i] for i < pc[p], in 16-byte
// vectors. A compiled program's pre-recorded replay (queue.rs) moves its arguments into its
// placeholders and its results out with one of these on each side instead of a
// vkCmdCopyBuffer per buffer: on the H200 the MNIST step's 11 copies cost ~30 us of GPU time,
// where independent copies in one dispatch overlap.
// Bindings: 0..7 sources (read), 8..15 destinations (write); a pair past the last has size 0
// (its bindings repeat the first pair's and are never touched).
// Push: pc[0..8] each pair's size in 16-byte vectors. Dispatch: elementwise grid over the largest.
// GATED (copy_multi_gated): binding 0 is a u32 gate read first, the pairs move up one binding,
// and nothing is copied while the gate is 0: a compiled device-side `while` (loops.rs) keeps its
// state once its condition is false.
#include "common.glsl"
layout(local_size_x_id = 3) in;
#ifdef GATED
layout(set = 0, binding = 0) readonly buffer Gate { uint gate; };
#define FIRST 1
#else
#define FIRST 0
#endif
layout(set = 0, binding = FIRST + 0) readonly buffer S0 { uvec4 s0[]; };
layout(set = 0, binding = FIRST + 1) readonly buffer S1 { uvec4 s1[]; };
layout(set = 0, binding = FIRST + 2) readonly buffer S2 { uvec4 s2[]; };
layout(set = 0, binding = FIRST + 3) readonly buffer S3 { uvec4 s3[]; };
layout(set = 0, binding = FIRST + 4) readonly buffer S4 { uvec4 s4[]; };
layout(set = 0, binding = FIRST + 5) readonly buffer S5 { uvec4 s5[]; };
layout(set = 0, binding = FIRST + 6) readonly buffer S6 { uvec4 s6[]; };
layout(set = 0, binding = FIRST + 7) readonly buffer S7 { uvec4 s7[]; };
layout(set = 0, binding = FIRST + 8) writeonly buffer D0 { uvec4 d0[]; };
layout(set = 0, binding = FIRST + 9) writeonly buffer D1 { uvec4 d1[]; };
layout(set = 0, binding = FIRST + 10) writeonly buffer D2 { uvec4 d2[]; };
layout(set = 0, binding = FIRST + 11) writeonly buffer D3 { uvec4 d3[]; };
layout(set = 0, binding = FIRST + 12) writeonly buffer D4 { uvec4 d4[]; };
layout(set = 0, binding = FIRST + 13) writeonly buffer D5 { uvec4 d5[]; };
layout(set = 0, binding = FIRST + 14) writeonly buffer D6 { uvec4 d6[]; };
layout(set = 0, binding = FIRST + 15) writeonly buffer D7 { uvec4 d7[]; };

void main() {
#ifdef GATED
  if (gate == 0u) return;
#endif
  uint i = element_index();
  if (i < pc[0]) d0[i] = s0[i];
  if (i < pc[1]) d1[i] = s1[i];
  if (i < pc[2]) d2[i] = s2[i];
  if (i < pc[3]) d3[i] = s3[i];
  if (i < pc[4]) d4[i] = s4[i];
  if (i < pc[5]) d5[i] = s5[i];
  if (i < pc[6]) d6[i] = s6[i];
  if (i < pc[7]) d7[i] = s7[i];
}
