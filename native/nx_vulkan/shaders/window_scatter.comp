#version 450
// window_scatter_max (OP 0) / window_scatter_min (OP 1), as Nx.BinaryBackend: the input padded
// with init_value is cut into windows at the strides; in each window the selected element is
// the last one >= (max) or <= (min) the running selection, scanning in row-major order; every
// window's source value is added, in window order and rounded to T at each step, to init_value
// at its selected position (positions in the padding are dropped). One invocation per output
// element enumerates the windows that cover it.
// Defines: T element, W compute type, IS_INT. Bindings: 0 x (read), 1 source (read),
// 2 init (read, one element), 3 out (write). Push: pc[0] outputs, pc[1] rank (<= 6), then per
// dim d at 2 + 5d: input dim, source dim, window dim, stride, low padding.
#include "common.glsl"
layout(local_size_x_id = 3) in;
layout(constant_id = 0) const uint OP = 0;
layout(set = 0, binding = 0) readonly buffer X { T x[]; };
layout(set = 0, binding = 1) readonly buffer S { T src[]; };
layout(set = 0, binding = 2) readonly buffer I { T init[]; };
layout(set = 0, binding = 3) writeonly buffer O { T o[]; };

uint P(uint d, uint k) { return pc[2 + 5 * d + k]; }

// Value at padded coordinates (init_value outside the input).
W padded_value(int pos[6], uint rank) {
  uint off = 0;
  for (uint d = 0; d < rank; ++d) {
    int c = pos[d] - int(P(d, 4));
    if (c < 0 || c >= int(P(d, 0))) return W(init[0]);
    off = off * P(d, 0) + uint(c);
  }
  return W(x[off]);
}

void main() {
  uint n = pc[0], rank = pc[1];
  uint e = element_index();
  if (e >= n) return;
  int p[6];    // this element, in padded coordinates
  int lo[6];   // first and last covering window per dim
  int hi[6];
  uint rest = e;
  for (int d = int(rank) - 1; d >= 0; --d) {
    uint dim = P(d, 0);
    uint q = rest / dim;
    p[d] = int(rest - q * dim) + int(P(d, 4));
    rest = q;
    int wd = int(P(d, 2)), st = int(P(d, 3)), sd = int(P(d, 1));
    int first = p[d] - wd + 1;
    lo[d] = first <= 0 ? 0 : (first + st - 1) / st;
    hi[d] = min(p[d] / st, sd - 1);
  }
  T acc = init[0];
  bool empty = false;
  for (uint d = 0; d < rank; ++d) empty = empty || lo[d] > hi[d];
  if (!empty) {
    int w[6];
    for (uint d = 0; d < rank; ++d) w[d] = lo[d];
    while (true) {
      // Select within window w: scan its elements in row-major order.
      uint count = 1;
      for (uint d = 0; d < rank; ++d) count *= P(d, 2);
      int best[6];
      W best_v = W(0);
      for (uint k = 0; k < count; ++k) {
        int pos[6];
        uint r = k;
        for (int d = int(rank) - 1; d >= 0; --d) {
          uint wd = P(d, 2);
          uint q = r / wd;
          pos[d] = w[d] * int(P(d, 3)) + int(r - q * wd);
          r = q;
        }
        W v = padded_value(pos, rank);
        bool take = k == 0u || (OP == 0u ? v >= best_v : v <= best_v);
        if (take) { best_v = v; for (uint d = 0; d < rank; ++d) best[d] = pos[d]; }
      }
      bool mine = true;
      for (uint d = 0; d < rank; ++d) mine = mine && best[d] == p[d];
      if (mine) {
        uint s_off = 0;
        for (uint d = 0; d < rank; ++d) s_off = s_off * P(d, 1) + uint(w[d]);
        acc = T(W(acc) + W(src[s_off]));
      }
      // Next covering window, last dim fastest.
      int d = int(rank) - 1;
      while (d >= 0 && w[d] == hi[d]) { w[d] = lo[d]; --d; }
      if (d < 0) break;
      w[d] += 1;
    }
  }
  o[e] = acc;
}
