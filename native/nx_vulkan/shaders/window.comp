#version 450
// window_sum / window_product / window_max / window_min with strides, padding and window
// dilations: one invocation per output element folds its window in order; padded positions
// contribute the op's identity (0, 1, the type's lowest, the type's highest), as the
// BinaryBackend pads. Same defines and specialization (op) as reduce.comp.
// Bindings: 0 x (read, contiguous), 1 y (write, contiguous).
// Push: pc[0] outputs, pc[1] rank, pc[2] window element count, then per dim d (rank <= 7) at
//       3 + 4d: output dim, input dim, window dim << 16 | stride, dilation << 16 | (low pad + 32768).
#include "common.glsl"
layout(local_size_x_id = 3) in;
layout(constant_id = 0) const uint OP = 0;
layout(set = 0, binding = 0) readonly buffer X { T x[]; };
layout(set = 0, binding = 1) writeonly buffer Y { T y[]; };

#include "reduce_ops.glsl"

void main() {
  uint n = pc[0], rank = pc[1], count = pc[2];
  uint o = element_index();
  if (o >= n) return;
  // Output coordinates, last dim fastest.
  int base[7];
  uint rest = o;
  for (int d = int(rank) - 1; d >= 0; --d) {
    uint dim = pc[3 + 4 * d];
    uint q = rest / dim;
    uint c = rest - q * dim;
    uint stride = pc[5 + 4 * d] & 0xffffu;
    int low = int(pc[6 + 4 * d] & 0xffffu) - 32768;
    base[d] = int(c * stride) - low;
    rest = q;
  }
  ACC acc = identity();
  for (uint w = 0; w < count; ++w) {
    uint wr = w;
    int off = 0;
    int scale = 1;
    bool inside = true;
    for (int d = int(rank) - 1; d >= 0; --d) {
      uint wdim = pc[5 + 4 * d] >> 16;
      uint q = wr / wdim;
      uint wc = wr - q * wdim;
      wr = q;
      int pos = base[d] + int(wc * (pc[6 + 4 * d] >> 16));
      int in_dim = int(pc[4 + 4 * d]);
      inside = inside && pos >= 0 && pos < in_dim;
      off += pos * scale;
      scale *= in_dim;
    }
    acc = combine(acc, inside ? ACC(x[off]) : identity());
  }
  y[o] = T(acc);
}
