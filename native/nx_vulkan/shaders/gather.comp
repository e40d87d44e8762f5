#version 450
// gather: out[b, r] = x[sum_j clamp(idx[b, j], 0, dim_j - 1) * stride_j + offset of rest index r],
// for b over the index tuples and r over the dims not indexed. Indices are s64 (the Elixir side
// casts them); out-of-range indices are clamped, as XLA does (Nx.BinaryBackend raises).
// T is an unsigned storage type of the element's width.
// Bindings: 0 x (read), 1 indices (read, s64), 2 out (write).
// Push: pc[0] outputs, pc[1] k (index depth), pc[2] rest count, pc[3] rest rank,
//       pc[4..10] indexed dims, pc[10..16] indexed strides, pc[16..22] rest dims, pc[22..28] rest strides.
#include "common.glsl"
layout(local_size_x_id = 3) in;
layout(set = 0, binding = 0) readonly buffer X { T x[]; };
layout(set = 0, binding = 1) readonly buffer I { int64_t idx[]; };
layout(set = 0, binding = 2) writeonly buffer O { T o[]; };

void main() {
  uint n = pc[0], k = pc[1], rest = pc[2], rest_rank = pc[3];
  uint i = element_index();
  if (i >= n) return;
  uint b = i / rest;
  uint r = i - b * rest;
  int off = int(strided(r, rest_rank, 16, 22, 0));
  for (uint j = 0; j < k; ++j) {
    int64_t v = idx[b * k + j];
    int64_t hi = int64_t(pc[4 + j]) - 1;
    int c = int(clamp(v, int64_t(0), hi));
    off += c * int(pc[10 + j]);
  }
  o[i] = x[off];
}
