#version 450
// Complex element-wise ops. T2 is the storage pair (vec2 for c64, dvec2 for c128); every op
// computes in f64 pairs and rounds once, as the BinaryBackend (Erlang floats) does.
// Binary (define BINARY): c = op(a, b) broadcast through strides, op 0 add, 1 subtract,
// 2 multiply, 3 divide; with OUT_U8, 0 equal, 1 not_equal. Bindings 0 a, 1 b, 2 c; push as
// binary.comp. Unary (no BINARY): op 0 negate, 1 conjugate, 2 sqrt, 3 exp, 4 log (the complex
// library's formulas, with the crate's f64 routines); bindings 0 x, 1 y; pc[0] n.
#include "common.glsl"
#include "math64.glsl"
layout(local_size_x = WG) in;
layout(constant_id = 0) const uint OP = 0;

#ifdef BINARY
layout(set = 0, binding = 0) readonly buffer A { T2 a[]; };
layout(set = 0, binding = 1) readonly buffer B { T2 b[]; };
#ifdef OUT_U8
layout(set = 0, binding = 2) writeonly buffer C { uint8_t c[]; };
#else
layout(set = 0, binding = 2) writeonly buffer C { T2 c[]; };
#endif

dvec2 apply(dvec2 x, dvec2 y) {
  switch (OP) {
    case 0: return x + y;
    case 1: return x - y;
    case 2: return dvec2(x.x * y.x - x.y * y.y, x.x * y.y + x.y * y.x);
    default: {
      double d = y.x * y.x + y.y * y.y;
      return dvec2((x.x * y.x + x.y * y.y) / d, (x.y * y.x - x.x * y.y) / d);
    }
  }
}

void main() {
  uint n = pc[0];
  uint rank = pc[1];
  uint i = element_index();
  if (i >= n) return;
  int ao = int(pc[2]), bo = int(pc[3]);
  uint rest = i;
  for (int d = int(rank) - 1; d >= 0; --d) {
    uint dim = pc[4 + d];
    uint q = rest / dim;
    int r = int(rest - q * dim);
    ao += r * int(pc[10 + d]);
    bo += r * int(pc[16 + d]);
    rest = q;
  }
  dvec2 x = dvec2(a[ao]), y = dvec2(b[bo]);
#ifdef OUT_U8
  bool eq = x == y;
  c[i] = uint8_t((OP == 0u ? eq : !eq) ? 1 : 0);
#else
  c[i] = T2(apply(x, y));
#endif
}
#else
// |z| as the complex library computes it: x sqrt(1 + (y/x)^2) for x = max(|re|, |im|); NaN in
// both parts gives NaN, any other non-finite part Inf.
double cabs(dvec2 v) {
  double a = abs(v.x), b = abs(v.y);
  if (isnan(v.x) && isnan(v.y)) return v.x;
  if (isnan(v.x) || isnan(v.y) || isinf(v.x) || isinf(v.y)) return inf64();
  if (a == 0.0lf) return b;
  if (b == 0.0lf) return a;
  precise double r = a > b ? a * sqrt(1.0lf + b / a * (b / a)) : b * sqrt(1.0lf + a / b * (a / b));
  return r;
}
#endif

#ifdef BINARY
#elif defined(REAL_OUT)
// abs (OP 0) to the real type R, and is_nan (OP 1) / is_infinity (OP 2) to u8, with the complex
// library's rules: abs is x sqrt(1 + (y/x)^2) for x = max(|re|, |im|); NaN in both parts gives
// NaN, any other non-finite part Inf.
layout(set = 0, binding = 0) readonly buffer X { T2 x[]; };
layout(set = 0, binding = 1) writeonly buffer Y { R y[]; };
layout(set = 0, binding = 1) writeonly buffer Y8 { uint8_t y8[]; };

void main() {
  uint i = element_index();
  if (i >= pc[0]) return;
  dvec2 v = dvec2(x[i]);
  if (OP == 1u) { y8[i] = uint8_t(isnan(v.x) || isnan(v.y) ? 1 : 0); return; }
  if (OP == 2u) { y8[i] = uint8_t(isinf(v.x) || isinf(v.y) ? 1 : 0); return; }
  y[i] = R(cabs(v));
}
#else
layout(set = 0, binding = 0) readonly buffer X { T2 x[]; };
layout(set = 0, binding = 1) writeonly buffer Y { T2 y[]; };

dvec2 csqrt(dvec2 z) {
  double r = z.x, im = z.y;
  if (r == 0.0lf && im == 0.0lf) return z;
  double x = abs(r), y = abs(im);
  precise double w = x >= y ? sqrt(x) * sqrt(0.5lf * (1.0lf + sqrt(1.0lf + y / x * (y / x))))
                            : sqrt(y) * sqrt(0.5lf * (x / y + sqrt(1.0lf + x / y * (x / y))));
  if (r >= 0.0lf) {
    precise double q = im / (2.0lf * w);
    return dvec2(w, q);
  }
  double i2 = im >= 0.0lf ? w : -w;
  precise double q = im / (2.0lf * i2);
  return dvec2(q, i2);
}

void main() {
  load_math_tables();
  uint i = element_index();
  if (i >= pc[0]) return;
  dvec2 v = dvec2(x[i]);
  dvec2 r;
  switch (OP) {
    case 0: r = -v; break;
    case 1: r = dvec2(v.x, -v.y); break;
    case 2: r = csqrt(v); break;
    case 3: {
      precise double rho = exp64(v.x);
      precise double re = rho * cos64(v.y);
      precise double im = rho * sin64(v.y);
      r = dvec2(re, im);
      break;
    }
    default: r = dvec2(log64(cabs(v)), atan2_64(v.y, v.x)); break;
  }
  y[i] = T2(r);
}
#endif
