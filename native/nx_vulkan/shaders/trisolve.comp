#version 450
// Triangular solve M y = r for each right-hand-side column, one invocation per (batch, column),
// mirroring Nx.BinaryBackend's order of operations: y_i = (r_i - sum_j M_ij y_j) / M_ii, the sum
// in ascending j for forward substitution and descending j for backward, intermediate y kept in
// W (f64 for precise f32) in the scratch buffer and rounded once into the output.
// Defines: T element, W compute type; COMPLEX for c64/c128 (T, W vec2/dvec2: + and - are
// component-wise already; products and quotients as the complex library forms them).
// Bindings: 0 a (read), 1 b (read), 2 scratch (W, read and
// write, private to this dispatch), 3 out (write). Push: pc[0] n, pc[1] columns, pc[2] batches,
// pc[3] backward, pc[4] a row stride, pc[5] a column stride, pc[6] b row stride, pc[7] b column
// stride, pc[8] a batch stride, pc[9] b batch stride.
#include "common.glsl"
layout(local_size_x_id = 3) in;
#ifdef COMPLEX
// (a + bi)(c + di) = (ac - bd) + (bc + ad)i; (a + bi)/(c + di) = ((ac + bd) + (bc - ad)i) / (c^2 + d^2)
W mul(W x, W y) { return W(x.x * y.x - x.y * y.y, x.y * y.x + x.x * y.y); }
W quo(W x, W y) {
  precise W num = W(x.x * y.x + x.y * y.y, x.y * y.x - x.x * y.y);
  precise W den = W(y.x * y.x + y.y * y.y);
  return num / den;
}
#else
W mul(W x, W y) { return x * y; }
W quo(W x, W y) { return x / y; }
#endif
layout(set = 0, binding = 0) readonly buffer A { T a[]; };
layout(set = 0, binding = 1) readonly buffer B { T b[]; };
layout(set = 0, binding = 2) buffer S { W y[]; };
layout(set = 0, binding = 3) writeonly buffer O { T o[]; };

void main() {
  uint n = pc[0], cols = pc[1], batches = pc[2];
  uint e = element_index();
  if (e >= batches * cols) return;
  uint batch = e / cols;
  uint c = e - batch * cols;
  uint ab = batch * pc[8];
  uint bb = batch * pc[9] + c * pc[7];
  bool backward = pc[3] != 0u;
  for (uint step = 0; step < n; ++step) {
    uint i = backward ? n - 1u - step : step;
    W dot = W(0);
    for (uint t = 0; t < step; ++t) {
      uint j = backward ? n - 1u - t : t;
      dot = mul(W(a[ab + i * pc[4] + j * pc[5]]), y[bb + j * pc[6]]) + dot;
    }
    W v = quo(W(b[bb + i * pc[6]]) - dot, W(a[ab + i * pc[4] + i * pc[5]]));
    y[bb + i * pc[6]] = v;
    o[bb + i * pc[6]] = T(v);
  }
}
