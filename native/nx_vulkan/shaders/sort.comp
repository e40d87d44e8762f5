#version 450
// sort / argsort along one axis, stable, by rank: each invocation takes one element and counts
// the elements of its row that go before it (smaller - larger for :desc - or equal and earlier),
// which is its position. NaN sorts as the largest value, as in Nx.BinaryBackend. O(n^2) per
// row, fully parallel: fine for the row lengths Nx programs sort on a GPU.
// Defines: T element, W compute type, IS_INT. Specialization: constant 0 = desc | argsort << 1 |
// (index bytes == 8) << 2. Bindings: 0 x (read), 1 out (write: values as T, or u32/u64 indices).
// Push: pc[0] n, pc[1] axis length, pc[2] axis stride, pc[3] kept rank, pc[4..10] kept dims,
//       pc[10..16] kept strides (output and input share the shape).
#include "common.glsl"
layout(local_size_x_id = 3) in;
layout(constant_id = 0) const uint OP = 0;
layout(set = 0, binding = 0) readonly buffer X { T x[]; };
layout(set = 0, binding = 1) writeonly buffer YT { T yt[]; };
layout(set = 0, binding = 1) writeonly buffer Y4 { uint y4[]; };
layout(set = 0, binding = 1) writeonly buffer Y8 { uint64_t y8[]; };

#ifdef IS_INT
bool is_nan_value(W v) { return false; }
#else
bool is_nan_value(W v) { return isnan(v); }
#endif

// a goes before b in ascending order (NaN largest).
bool less(W a, W b) {
  if (is_nan_value(a)) return false;
  if (is_nan_value(b)) return true;
  return a < b;
}

bool same(W a, W b) { return (is_nan_value(a) && is_nan_value(b)) || a == b; }

void main() {
  uint n = pc[0], len = pc[1], stride = pc[2];
  uint e = element_index();
  if (e >= n) return;
  uint row = e / len;
  uint i = e - row * len;
  uint base = strided(row, pc[3], 4, 10, 0);
  bool desc = (OP & 1u) != 0u;
  W v = W(x[base + i * stride]);
  uint pos = 0;
  for (uint j = 0; j < len; ++j) {
    W u = W(x[base + j * stride]);
    bool before = desc ? less(v, u) : less(u, v);
    if (before || (j < i && same(u, v))) pos++;
  }
  uint dst = base + pos * stride;
  if ((OP & 2u) == 0u) yt[dst] = T(v);
  else if ((OP & 4u) != 0u) y8[dst] = uint64_t(i);
  else y4[dst] = i;
}
