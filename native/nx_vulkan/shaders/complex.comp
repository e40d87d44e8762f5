#version 450
// Complex element-wise ops. T2 is the storage pair (vec2 for c64, dvec2 for c128); every op
// computes in f64 pairs and rounds once, as the BinaryBackend (Erlang floats) does.
// Binary (define BINARY): c = op(a, b) broadcast through strides, op 0 add, 1 subtract,
// 2 multiply, 3 divide, 4 pow (the complex library's: polar form, pow/exp/cos/sin in f64); with
// OUT_U8, 0 equal, 1 not_equal. Bindings 0 a, 1 b, 2 c; push as binary.comp. Unary (no BINARY): op 0 negate, 1 conjugate, 2 sqrt, 3 exp, 4 log, 5 expm1,
// 6 log1p, 7 sigmoid, 8 sin, 9 cos, 10 tan, 11 sinh, 12 cosh, 13 tanh, 14 asin, 15 acos, 16 atan,
// 17 asinh, 18 acosh, 19 atanh, 20 rsqrt, 21 cbrt: the complex library's formulas step by step
// (what Nx.BinaryBackend evaluates), with the crate's f64 routines; bindings 0 x, 1 y; pc[0] n.
#include "common.glsl"
#include "math64.glsl"
#include "complex_math.glsl"
layout(local_size_x_id = 3) in;
layout(constant_id = 0) const uint OP = 0;

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

#ifdef BINARY
layout(set = 0, binding = 0) readonly buffer A { T2 a[]; };
layout(set = 0, binding = 1) readonly buffer B { T2 b[]; };
#ifdef OUT_U8
layout(set = 0, binding = 2) writeonly buffer C { uint8_t c[]; };
#else
layout(set = 0, binding = 2) writeonly buffer C { T2 c[]; };
#endif

dvec2 cpow(dvec2 x, dvec2 y) {
  if (x.x == 0.0lf && x.y == 0.0lf) return (y.x == 0.0lf && y.y == 0.0lf) ? dvec2(1.0lf, 0.0lf) : dvec2(0.0lf);
  if (y.x == 1.0lf && y.y == 0.0lf) return x;
  if (y.x == -1.0lf && y.y == 0.0lf) return cdiv(dvec2(1.0lf, 0.0lf), x);
  double rho = cabs(x);
  double theta = atan2_64(x.y, x.x);
  precise double s = pow64(rho, y.x) * exp64(-y.y * theta);
  precise double r = y.x * theta + y.y * log64(rho);
  precise double re = s * cos64(r);
  precise double im = s * sin64(r);
  return dvec2(re, im);
}

dvec2 apply(dvec2 x, dvec2 y) {
  switch (OP) {
    case 0: return x + y;
    case 1: return x - y;
    case 2: return cmul(x, y);
    case 3: return cdiv(x, y);
    default: return cpow(x, y);
  }
}

void main() {
  load_math_tables();
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
  dvec2 r = apply(x, y);
  c[i] = T2(CANONICAL_NAN(double, r.x), CANONICAL_NAN(double, r.y));
#endif
}


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
  // The library's clauses for non-finite parts come first, in its order.
  if (isnan(z.x) || isnan(z.y)) return dvec2(nan64(), nan64());
  if (isinf(z.y)) return dvec2(inf64(), z.y);
  if (isinf(z.x)) return z.x > 0.0lf ? dvec2(inf64(), 0.0lf) : dvec2(0.0lf, inf64());
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

dvec2 cexp(dvec2 v) {
  precise double rho = exp64(v.x);
  precise double re = rho * cos64(v.y);
  precise double im = rho * sin64(v.y);
  return dvec2(re, im);
}

// The library's atan2 of the parts: over an infinite real part a finite y gives 0 (+Inf) or pi
// (-Inf) whatever y's sign; C keeps the sign.
double lib_atan2(double y, double x) {
  if (isinf(x) && !isinf(y) && !isnan(y)) return x > 0.0lf ? 0.0lf : 3.141592653589793lf;
  return atan2_64(y, x);
}

dvec2 clog(dvec2 v) { return dvec2(log64(cabs(v)), lib_atan2(v.y, v.x)); }

// 1, i, -i and 0 as values the compiler cannot see: pc[31] is always 0 (no complex kernel sets
// it). With literal zeros, compilers fold 0 * x to 0 and 0 - x to -x, which drops NaNs (0 * Inf)
// and flips zeros' signs, and each driver folds differently; as values, every step rounds as
// IEEE (and so as the complex library's Erlang arithmetic, where the integer 0 acts as +0.0).
double Z;
dvec2 ONE, I, MINUS_I;

void set_constants() {
  Z = double(pc[31]);
  ONE = dvec2(1.0lf + Z, Z);
  I = dvec2(Z, 1.0lf + Z);
  MINUS_I = dvec2(-Z, -1.0lf - Z);  // negate(i)
}

dvec2 csin(dvec2 v) {
  precise double re = sin64(v.x) * cosh64(v.y);
  precise double im = cos64(v.x) * sinh64(v.y);
  return dvec2(re, im);
}

dvec2 ccos(dvec2 v) {
  precise double re = cos64(v.x) * cosh64(v.y);
  precise double im = -sin64(v.x) * sinh64(v.y);
  return dvec2(re, im);
}

dvec2 csinh(dvec2 v) {
  precise dvec2 d = cexp(v) - cexp(-v);
  return d / 2.0lf;
}

dvec2 ccosh(dvec2 v) {
  precise dvec2 s = cexp(v) + cexp(-v);
  return s / 2.0lf;
}

dvec2 apply_unary(dvec2 v) {
  switch (OP) {
    case 0: return -v;
    case 1: return dvec2(v.x, -v.y);
    case 2: return csqrt(v);
    case 3: return cexp(v);
    case 4: return clog(v);
    case 5: { precise dvec2 e = cexp(v); return dvec2(e.x - 1.0lf, e.y); }
    case 6: { precise dvec2 u = v + ONE; return clog(u); }
    case 7: { precise dvec2 d = cexp(-v) + ONE; return cdiv(ONE, d); }
    case 8: return csin(v);
    case 9: return ccos(v);
    case 10: return cdiv(csin(v), ccos(v));
    case 11: return csinh(v);
    case 12: return ccosh(v);
    case 13: return cdiv(csinh(v), ccosh(v));
    case 14: {  // -i log(i z + sqrt(1 - z z))
      precise dvec2 t2 = ONE - cmul(v, v);
      precise dvec2 w = cmul(I, v) + csqrt(t2);
      return cmul(MINUS_I, clog(w));
    }
    case 15: {  // -i log(z + sqrt(z z - 1))
      precise dvec2 t1 = cmul(v, v) - ONE;
      precise dvec2 w = v + csqrt(t1);
      return cmul(MINUS_I, clog(w));
    }
    case 16: {  // (0.5 i) (log(1 - i z) - log(1 + i z))
      precise dvec2 iz = cmul(I, v);
      precise dvec2 d = clog(ONE - iz) - clog(ONE + iz);
      return cmul(cmul(dvec2(0.5lf, Z), I), d);
    }
    case 17: {  // log(z + sqrt(z z + 1))
      precise dvec2 t1 = cmul(v, v) + ONE;
      precise dvec2 w = v + csqrt(t1);
      return clog(w);
    }
    case 18: {  // log(z + sqrt(z z - 1))
      precise dvec2 t1 = cmul(v, v) - ONE;
      precise dvec2 w = v + csqrt(t1);
      return clog(w);
    }
    case 19: {  // 0.5 log((1 + z) / (1 - z))
      precise dvec2 q = cdiv(ONE + v, ONE - v);
      return cmul(dvec2(0.5lf, Z), clog(q));
    }
    case 20: return cdiv(ONE, csqrt(v));
    default: {  // from_polar(cbrt(|z|), phase(z) / 3)
      double r = cbrt64(cabs(v));
      precise double phi = atan2_64(v.y, v.x) / 3.0lf;
      if (phi == 0.0lf) return dvec2(r, 0.0lf);
      precise double re = r * cos64(phi) - Z * sin64(phi);
      precise double im = Z * cos64(phi) + r * sin64(phi);
      return dvec2(re, im);
    }
  }
}

void main() {
  load_math_tables();
  set_constants();
  uint i = element_index();
  if (i >= pc[0]) return;
  dvec2 r = apply_unary(dvec2(x[i]));
  y[i] = T2(CANONICAL_NAN(double, r.x), CANONICAL_NAN(double, r.y));
}
#endif
