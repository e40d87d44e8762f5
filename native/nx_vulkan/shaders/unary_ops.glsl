// The unary ops of unary.comp, by op code (ops/elementwise.rs, UNARY_OPS): y = unary_apply(op, x)
// in the compute type W. Included by unary.comp (op = its specialization constant) and by the
// compiler's fused element-wise kernels (fuse.rs), so a fused op computes exactly what its own
// kernel does. Needs the dtype defines (T, W, IS_INT...) and, for f64 math, math64.glsl with
// MATH64 defined.
// The functions that compute are `precise` (SPIR-V NoContraction on their arithmetic): in a fused
// kernel, where one op's result goes to the next in a register, no driver may contract a multiply
// of one op with an add of the next into an fma, which two kernels (a store and a load between
// them) never do. glslang marks what a precise function computes for its result but not what
// the functions it calls compute (KhronosGroup/glslang#2710), so each helper that computes is
// precise itself.
#ifdef IS_INT
// The value's BITS low bits, zero-extended (8/16-bit values arrive sign-extended in W).
#if BITS == 64
uint lo_bits(W a) { return uint(uint64_t(a)); }
uint hi_bits(W a) { return uint(uint64_t(a) >> 32); }
#else
uint lo_bits(W a) { return BITS == 32 ? uint(a) : (uint(a) & ((1u << BITS) - 1u)); }
uint hi_bits(W a) { return 0u; }
#endif
int count_leading_zeros(W a) {
  uint hi = hi_bits(a), lo = lo_bits(a);
#if BITS == 64
  return hi != 0u ? 31 - findMSB(hi) : (lo != 0u ? 63 - findMSB(lo) : 64);
#else
  return lo != 0u ? BITS - 1 - findMSB(lo) : BITS;
#endif
}

precise W unary_apply(uint op, W a) {
  switch (op) {
    case 0: return W(0) - a;                            // negate (wraps)
#ifdef IS_SIGNED
    case 1: return a < W(0) ? W(0) - a : a;             // abs
    case 2: return a > W(0) ? W(1) : (a < W(0) ? W(-1) : W(0)); // sign
#else
    case 1: return a;
    case 2: return a > W(0) ? W(1) : W(0);
#endif
    case 3: case 4: case 5: return a;                   // floor, ceil, round: integers already
    case 15: return ~a;                                 // bitwise_not
    case 16: return W(count_leading_zeros(a));          // count_leading_zeros
    case 17: return W(bitCount(lo_bits(a)) + bitCount(hi_bits(a))); // population_count
    default: return a;
  }
}
#else
precise W round_half_away(W a) { return sign(a) * floor(abs(a) + W(0.5)); }

#ifndef MATH64
// erf_inv without f64: the same polynomials in the compute type.
precise W erf_inv32(W x) {
  if (isnan(x) || abs(x) > W(1)) return W(uintBitsToFloat(0x7fc00000u));
  if (abs(x) == W(1)) return x * W(uintBitsToFloat(0x7f800000u));
  W w = -log((W(1) - x) * (W(1) + x));
  W p;
  if (w < W(5)) {
    w -= W(2.5);
    p = W(2.81022636e-08);
    p = p * w + W(3.43273939e-07); p = p * w + W(-3.5233877e-06); p = p * w + W(-4.39150654e-06);
    p = p * w + W(0.00021858087); p = p * w + W(-0.00125372503); p = p * w + W(-0.00417768164);
    p = p * w + W(0.246640727); p = p * w + W(1.50140941);
  } else {
    w = sqrt(w) - W(3);
    p = W(-0.000200214257);
    p = p * w + W(0.000100950558); p = p * w + W(0.00134934322); p = p * w + W(-0.00367342844);
    p = p * w + W(0.00573950773); p = p * w + W(-0.0076224613); p = p * w + W(0.00943887047);
    p = p * w + W(1.00167406); p = p * w + W(2.83297682);
  }
  return p * x;
}

// erf without f64: the same series / continued fraction in the compute type (f32 accuracy).
precise W erf64_missing(W x) {
  W ax = abs(x);
  if (ax < W(2.5)) {
    W z = x * x, term = x, sum = x;
    for (int n = 1; n < 40; ++n) { term *= -z / W(n); sum += term / W(2 * n + 1); }
    return W(1.1283791670955126) * sum;
  }
  W f = ax;
  for (int k = 40; k >= 1; --k) f = ax + (W(k) * W(0.5)) / f;
  W r = W(1) - exp(-ax * ax) * W(0.5641895835477563) / f;
  return x < W(0) ? -r : r;
}
#endif

precise W unary_apply(uint op, W a) {
  switch (op) {
    case 0: return -a;                                  // negate
    case 1: return abs(a);                              // abs
    case 2: return (isnan(a) || a == W(0)) ? a : sign(a); // sign (keeps -0.0)
    case 3: return floor(a);                            // floor
    case 4: return ceil(a);                             // ceil
    case 5: return round_half_away(a);                  // round (half away from zero, as Nx)
#ifdef MATH64
#ifdef PRECISE  // an f32 or f16 result: exp64's, rounded
    case 6: return exp64_narrow(a);                     // exp
    case 13: return sigmoid64_narrow(a);                // sigmoid
#else
    case 6: return exp64(a);                            // exp
    case 13: return sigmoid64(a);                       // sigmoid
#endif
    case 7: return expm1_64(a);                         // expm1
    case 8: return log64(a);                            // log
    case 9: return log1p64(a);                          // log1p
    case 10: return a < W(0) ? nan64() : sqrt(a);       // sqrt
    case 11: return a < W(0) ? nan64() : W(1) / sqrt(a); // rsqrt
    case 12: return tanh64(a);                          // tanh
    case 18: return sin64(a);
    case 19: return cos64(a);
    case 20: return tan64(a);
    case 21: return asin64(a);
    case 22: return acos64(a);
    case 23: return atan64(a);
    case 24: return sinh64(a);
    case 25: return cosh64(a);
    case 26: return asinh64(a);
    case 27: return acosh64(a);
    case 28: return atanh64(a);
    case 29: return cbrt64(a);
    case 30: return erf64(a);
    case 31: return erfc64(a);
    case 32: return erf_inv64(a);
#else
    case 6: return exp(a);
    case 7: return abs(a) < W(1e-5) ? a + W(0.5) * a * a : exp(a) - W(1);
    case 8: return log(a);
    case 9: return abs(a) < W(1e-4) ? a - W(0.5) * a * a : log(W(1) + a);
    case 10: return sqrt(a);
    case 11: return inversesqrt(a);
    case 12: return tanh(a);
    case 13: return W(1) / (W(1) + exp(-a));
    case 18: return sin(a);
    case 19: return cos(a);
    case 20: return tan(a);
    case 21: return asin(a);
    case 22: return acos(a);
    case 23: return atan(a);
    case 24: return sinh(a);
    case 25: return cosh(a);
    case 26: return asinh(a);
    case 27: return acosh(a);
    case 28: return atanh(a);
    case 29: return sign(a) * pow(abs(a), W(1.0 / 3.0));
    case 30: return W(erf64_missing(a));
    case 31: return W(1) - W(erf64_missing(a));
    case 32: return W(erf_inv32(a));
#endif
    default: return a;
  }
}
#endif

// unary_apply's value by a short evaluation where the op has one (precise exp and sigmoid, see
// math64.glsl's *_short_checked), with `full` set where unary_apply's must replace it; every
// other op computes its value here and never sets `full`. A kernel that computes several
// elements calls this for each, then unary_apply for the flagged ones only, so that the common
// path stays straight-line code.
W unary_apply_short(uint op, W a, out bool full) {
  full = false;
#if defined(MATH64) && defined(PRECISE)
  if (op == 6u) return exp64_short_checked(a, full);
  if (op == 13u) return sigmoid64_short_checked(a, full);
#endif
  return unary_apply(op, a);
}
