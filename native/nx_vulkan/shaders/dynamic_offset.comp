#version 450
// The element offset sum_i clamp(start_i, 0, max_i) * stride_i of a slice or put_slice whose
// start indices are tensors, computed on the device so the host never reads them (Nx clamps
// tensor starts so the slice fits: max_i = dim - length). Each start is a scalar tensor of any
// integer type, bound on its own and read as 32-bit words: 1- and 2-byte ones from the low bytes
// of word 0, 8-byte ones from words 0 and 1 (every tensor buffer is at least 256 bytes).
// Bindings: 0..7 the start scalars (read; the host repeats binding 0 for unused ones), 8 the
// offset (one int, write). Push: pc[0] starts (1..8), pc[1] their types, 4 bits per start (bits
// 0-1: log2 of its bytes, bit 2: signed), pc[2..10] max start of each, pc[10..18] the stride
// (in elements, signed) each start moves by. One invocation.
#include "common.glsl"
layout(local_size_x = 1) in;
layout(set = 0, binding = 0) readonly buffer S0 { uint s0[]; };
layout(set = 0, binding = 1) readonly buffer S1 { uint s1[]; };
layout(set = 0, binding = 2) readonly buffer S2 { uint s2[]; };
layout(set = 0, binding = 3) readonly buffer S3 { uint s3[]; };
layout(set = 0, binding = 4) readonly buffer S4 { uint s4[]; };
layout(set = 0, binding = 5) readonly buffer S5 { uint s5[]; };
layout(set = 0, binding = 6) readonly buffer S6 { uint s6[]; };
layout(set = 0, binding = 7) readonly buffer S7 { uint s7[]; };
layout(set = 0, binding = 8) buffer O { int offset[]; };

uvec2 start_words(uint i) {
  switch (i) {
    case 0: return uvec2(s0[0], s0[1]);
    case 1: return uvec2(s1[0], s1[1]);
    case 2: return uvec2(s2[0], s2[1]);
    case 3: return uvec2(s3[0], s3[1]);
    case 4: return uvec2(s4[0], s4[1]);
    case 5: return uvec2(s5[0], s5[1]);
    case 6: return uvec2(s6[0], s6[1]);
    default: return uvec2(s7[0], s7[1]);
  }
}

#include "dynamic_start.glsl"

void main() {
  int off = 0;
  for (uint i = 0u; i < pc[0]; ++i) {
    uint type = (pc[1] >> (4u * i)) & 0xfu;
    off += int(clamped_start(start_words(i), type, pc[2 + i])) * int(pc[10 + i]);
  }
  offset[0] = off;
}
