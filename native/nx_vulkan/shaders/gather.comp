#version 450
// gather: out[b, r] = x[sum_j clamp(idx[b, j], 0, dim_j - 1) * stride_j + offset of rest index r],
// for b over the index tuples and r over the dims not indexed. Indices are s32 or s64 (the Elixir
// side casts narrower types to s32, wider ones to s64); out-of-range indices are clamped, as XLA
// does (Nx.BinaryBackend raises). T is an unsigned storage type of the element's width.
// Bindings: 0 x (read), 1 indices (read), 2 out (write).
// Push: pc[0] outputs, pc[1] k (index depth), pc[2] rest count, pc[3] rest rank,
//       pc[4..10] indexed dims, pc[10..16] indexed strides, pc[16..22] rest dims, pc[22..28] rest strides.
// Specialization: constant 0 = the indices' width in bytes (4 or 8).
#include "common.glsl"
layout(local_size_x_id = 3) in;
layout(set = 0, binding = 0) readonly buffer X { T x[]; };
layout(constant_id = 0) const uint INDEX_BYTES = 8;
layout(set = 0, binding = 1) readonly buffer I { int64_t idx[]; };
layout(set = 0, binding = 1) readonly buffer I32 { int idx32[]; };
layout(set = 0, binding = 2) writeonly buffer O { T o[]; };

void main() {
  uint n = pc[0], k = pc[1], rest = pc[2], rest_rank = pc[3];
  uint i = element_index();
  if (i >= n) return;
  // (Whole elements, a take's usual case: no division, no rest offset.)
  uint b = rest == 1u ? i : i / rest;
  uint r = i - b * rest;
  // Unsigned (the strides are x's contiguous ones): offsets past 2^31 elements, as a binding of
  // 1-byte elements can hold, stay right.
  uint off = rest == 1u ? 0u : strided(r, rest_rank, 16, 22, 0);
  for (uint j = 0; j < k; ++j) {
    uint c;
    if (INDEX_BYTES == 4u) {
      int v = idx32[b * k + j];
      c = v < 0 ? 0u : min(uint(v), pc[4 + j] - 1u);
    } else {
      int64_t v = idx[b * k + j];
      c = uint(clamp(v, int64_t(0), int64_t(pc[4 + j]) - 1));
    }
    off += c * pc[10 + j];
  }
  o[i] = x[off];
}
