#version 450
// y[i] = op(x[i]) for floating-point T (defines: T, and PRECISE to compute in f64 and round once).
// Bindings: 0 x (read), 1 y (write). Push: pc[0] = element count.
// Specialization: constant 0 = op code (see ops/elementwise.rs, UnaryOp). Dispatch: ceil(n/256) capped.
#include "common.glsl"
#if defined(PRECISE) || defined(IS_F64)
#include "math64.glsl"
#endif
layout(local_size_x = WG) in;
layout(constant_id = 0) const uint OP = 0;
layout(set = 0, binding = 0) readonly buffer X { T x[]; };
layout(set = 0, binding = 1) writeonly buffer Y { T y[]; };

#if defined(PRECISE) || defined(IS_F64)
#define W double
#else
#define W T
#endif

W round_half_away(W a) { return sign(a) * floor(abs(a) + W(0.5)); }

W apply(W a) {
  switch (OP) {
    case 0: return -a;                                  // negate
    case 1: return abs(a);                              // abs
    case 2: return isnan(a) ? a : sign(a);              // sign
    case 3: return floor(a);                            // floor
    case 4: return ceil(a);                             // ceil
    case 5: return round_half_away(a);                  // round (half away from zero, as Nx)
#if defined(PRECISE) || defined(IS_F64)
    case 6: return exp64(a);                            // exp
    case 7: return expm1_64(a);                         // expm1
    case 8: return log64(a);                            // log
    case 9: return log1p64(a);                          // log1p
    case 10: return a < W(0) ? nan64() : sqrt(a);       // sqrt
    case 11: return a < W(0) ? nan64() : W(1) / sqrt(a); // rsqrt
    case 12: return tanh64(a);                          // tanh
    case 13: return sigmoid64(a);                       // sigmoid
#else
    case 6: return exp(a);
    case 7: return abs(a) < W(1e-5) ? a + W(0.5) * a * a : exp(a) - W(1);
    case 8: return log(a);
    case 9: return abs(a) < W(1e-4) ? a - W(0.5) * a * a : log(W(1) + a);
    case 10: return sqrt(a);
    case 11: return inversesqrt(a);
    case 12: return tanh(a);
    case 13: return W(1) / (W(1) + exp(-a));
#endif
    case 14: return a * a;                              // square (internal helper)
    default: return a;
  }
}

void main() {
  uint n = pc[0];
  for (uint i = gl_GlobalInvocationID.x; i < n; i += grid_stride()) {
    y[i] = T(apply(W(x[i])));
  }
}
