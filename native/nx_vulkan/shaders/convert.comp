#version 450
// y[i] = convert(x[i]) between numeric types (as_type). Defines: TI input type, TO output type.
// Only conversions whose GLSL semantics equal Nx's are built (float->float, int->float, int->int
// wrap-around); float->int goes through the host fallback until it has Nx's rules.
// Bindings: 0 x (read), 1 y (write). Push: pc[0] n.
#include "common.glsl"
layout(local_size_x = WG) in;
layout(set = 0, binding = 0) readonly buffer X { TI x[]; };
layout(set = 0, binding = 1) writeonly buffer Y { TO y[]; };

void main() {
  uint n = pc[0];
  for (uint i = gl_GlobalInvocationID.x; i < n; i += grid_stride()) {
    y[i] = TO(x[i]);
  }
}
