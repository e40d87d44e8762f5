#version 450
// is_nan (OP 0) and is_infinity (OP 1) for floating-point T, writing u8.
// Bindings: 0 x (read), 1 y (write, u8). Push: pc[0] n. Dispatch: elementwise grid.
#include "common.glsl"
layout(local_size_x_id = 3) in;
layout(constant_id = 0) const uint OP = 0;
layout(set = 0, binding = 0) readonly buffer X { T x[]; };
layout(set = 0, binding = 1) writeonly buffer Y { uint8_t y[]; };

void main() {
  uint i = element_index();
  if (i >= pc[0]) return;
  W v = W(x[i]);
  y[i] = uint8_t((OP == 0u ? isnan(v) : isinf(v)) ? 1 : 0);
}
