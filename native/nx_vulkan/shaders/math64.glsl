// Double-precision transcendentals (GLSL has no f64 exp/log/tanh). Cody-Waite range reduction plus
// polynomials; accurate to about 1 ulp of f64. f32 kernels built with PRECISE route through these,
// then round once to f32, which is what Nx.BinaryBackend does (Erlang's :math is f64).
const double LN2_HI = 6.93147180369123816490e-01lf;
const double LN2_LO = 1.90821492927058770002e-10lf;
const double LOG2E = 1.44269504088896338700e+00lf;
const double SQRT_HALF = 0.70710678118654752440lf;

double nan64() { return uint64BitsToDouble(0x7ff8000000000000ul); }
double inf64() { return uint64BitsToDouble(0x7ff0000000000000ul); }

// 2^(j/32) for j = 0..31 as hi + lo (hi rounded to nearest, lo the remainder), from 60-digit decimal arithmetic.
const double EXP2_J32_HI[32] = double[32](
  1.0lf,
  1.0218971486541166lf,
  1.0442737824274138lf,
  1.0671404006768237lf,
  1.0905077326652577lf,
  1.1143867425958924lf,
  1.1387886347566916lf,
  1.1637248587775775lf,
  1.189207115002721lf,
  1.215247359980469lf,
  1.241857812073484lf,
  1.2690509571917332lf,
  1.2968395546510096lf,
  1.3252366431597413lf,
  1.3542555469368927lf,
  1.383909881963832lf,
  1.4142135623730951lf,
  1.4451808069770467lf,
  1.4768261459394993lf,
  1.5091644275934228lf,
  1.5422108254079407lf,
  1.5759808451078865lf,
  1.6104903319492543lf,
  1.645755478153965lf,
  1.681792830507429lf,
  1.718619298122478lf,
  1.7562521603732995lf,
  1.7947090750031072lf,
  1.8340080864093424lf,
  1.8741676341103lf,
  1.9152065613971474lf,
  1.9571441241754002lf);
const double EXP2_J32_LO[32] = double[32](
  0.0lf,
  5.109225028973444e-17lf,
  8.551889705537965e-17lf,
  -7.899853966841582e-17lf,
  -3.046782079812471e-17lf,
  1.0410278456845571e-16lf,
  8.912812676025408e-17lf,
  3.8292048369240935e-17lf,
  3.982015231465646e-17lf,
  -7.712630692681488e-17lf,
  4.658027591836937e-17lf,
  2.667932131342186e-18lf,
  2.5382502794888315e-17lf,
  -2.8587312100388614e-17lf,
  7.70094837980299e-17lf,
  -6.770511658794786e-17lf,
  -9.667293313452913e-17lf,
  -3.0237581349939873e-17lf,
  -3.483994556892796e-17lf,
  -1.016455327754295e-16lf,
  7.949834809697621e-17lf,
  -1.0136916471278304e-17lf,
  2.4707192569797888e-17lf,
  -1.0125679913674773e-16lf,
  8.199010020581497e-17lf,
  -1.851380418263111e-17lf,
  2.960140695448873e-17lf,
  1.8227458427912087e-17lf,
  3.283107224245627e-17lf,
  -6.122763413004143e-17lf,
  -1.0619946056195963e-16lf,
  8.960767791036668e-17lf);

// On GPUs the table lives in shared memory (SHARED_TABLE, specialization constant 1): lanes of a
// warp index it divergently, which serialises reads from constant memory (exp measured ~10x
// slower than a plain copy on the H200). Shaders that include this file call load_math_tables()
// from main, in uniform control flow, before any early return. CPUs (lavapipe) read the constant
// array directly and skip the barrier, which costs more than it saves there.
layout(constant_id = 1) const bool SHARED_TABLE = false;
shared double exp2_table_hi[32];
shared double exp2_table_lo[32];

void load_math_tables() {
  if (SHARED_TABLE) {
    uint i = gl_LocalInvocationIndex;
    if (i < 32u) {
      exp2_table_hi[i] = EXP2_J32_HI[i];
      exp2_table_lo[i] = EXP2_J32_LO[i];
    }
    barrier();
  }
}

double exp64(double x) {
  if (isnan(x)) return x;
  if (x > 709.782712893384lf) return inf64();
  if (x < -745.1332191019412lf) return 0.0lf;
  // x = (32k + j) ln2/32 + r with |r| <= ln2/64, so exp(x) = 2^k * 2^(j/32) * (1 + p), p = expm1(r).
  // The table entry carries ~107 bits and p is small, so the only sizeable rounding is the final
  // addition: the result is within ~0.52 ulp (agrees with a correctly rounded exp in >99.5% of
  // random inputs). `precise` forbids FMA fusion so every device rounds the same steps.
  precise double n = floor(x * (32.0lf / 6.93147180559945309417e-01lf) + 0.5lf);
  precise double hi = x - n * (LN2_HI / 32.0lf);
  precise double lo = n * (LN2_LO / 32.0lf);
  precise double r = hi - lo;
  precise double p = r * (1.0lf + r * (0.5lf + r * (1.0lf / 6.0lf + r * (1.0lf / 24.0lf +
                     r * (1.0lf / 120.0lf + r * (1.0lf / 720.0lf + r * (1.0lf / 5040.0lf)))))));
  int ni = int(n);
  int j = ni & 31;
  int k = (ni - j) / 32;
  precise double th = SHARED_TABLE ? exp2_table_hi[j] : EXP2_J32_HI[j];
  precise double tl = SHARED_TABLE ? exp2_table_lo[j] : EXP2_J32_LO[j];
  precise double y = th + (th * p + tl);
  // Two steps so that results in the subnormal range do not underflow the scale factor.
  int k1 = k / 2;
  return ldexp(ldexp(y, k1), k - k1);
}

double expm1_64(double x) {
  if (abs(x) < 0.5lf) {
    // Taylor to x^17: truncation < 1e-21.
    double p = 1.0lf / 355687428096000.0lf;
    p = p * x + 1.0lf / 20922789888000.0lf;
    p = p * x + 1.0lf / 1307674368000.0lf;
    p = p * x + 1.0lf / 87178291200.0lf;
    p = p * x + 1.0lf / 6227020800.0lf;
    p = p * x + 1.0lf / 479001600.0lf;
    p = p * x + 1.0lf / 39916800.0lf;
    p = p * x + 1.0lf / 3628800.0lf;
    p = p * x + 1.0lf / 362880.0lf;
    p = p * x + 1.0lf / 40320.0lf;
    p = p * x + 1.0lf / 5040.0lf;
    p = p * x + 1.0lf / 720.0lf;
    p = p * x + 1.0lf / 120.0lf;
    p = p * x + 1.0lf / 24.0lf;
    p = p * x + 1.0lf / 6.0lf;
    p = p * x + 0.5lf;
    return p * x * x + x;
  }
  return exp64(x) - 1.0lf;
}

double log64(double x) {
  if (isnan(x) || x < 0.0lf) return nan64();
  if (x == 0.0lf) return -inf64();
  if (isinf(x)) return x;
  int e;
  double m = frexp(x, e);
  if (m < SQRT_HALF) { m *= 2.0lf; e -= 1; }
  // log(m) = 2 atanh(s), s = (m-1)/(m+1), |s| <= 0.1716: odd series to s^25.
  double s = (m - 1.0lf) / (m + 1.0lf);
  double s2 = s * s;
  double t = 1.0lf / 25.0lf;
  t = t * s2 + 1.0lf / 23.0lf;
  t = t * s2 + 1.0lf / 21.0lf;
  t = t * s2 + 1.0lf / 19.0lf;
  t = t * s2 + 1.0lf / 17.0lf;
  t = t * s2 + 1.0lf / 15.0lf;
  t = t * s2 + 1.0lf / 13.0lf;
  t = t * s2 + 1.0lf / 11.0lf;
  t = t * s2 + 1.0lf / 9.0lf;
  t = t * s2 + 1.0lf / 7.0lf;
  t = t * s2 + 1.0lf / 5.0lf;
  t = t * s2 + 1.0lf / 3.0lf;
  double de = double(e);
  return de * LN2_HI + ((2.0lf * s) * (s2 * t) + de * LN2_LO + 2.0lf * s);
}

double log1p64(double x) {
  double u = 1.0lf + x;
  if (u == 1.0lf) return x;
  if (isinf(u)) return u;
  return log64(u) * (x / (u - 1.0lf));
}

double tanh64(double x) {
  double ax = abs(x);
  if (isnan(x) || x == 0.0lf) return x;
  if (ax > 22.0lf) return sign(x);
  double t;
  if (ax >= 1.0lf) {
    t = 1.0lf - 2.0lf / (expm1_64(2.0lf * ax) + 2.0lf);
  } else {
    double e = expm1_64(-2.0lf * ax);
    t = -e / (e + 2.0lf);
  }
  return x < 0.0lf ? -t : t;
}

double sigmoid64(double x) { return 1.0lf / (1.0lf + exp64(-x)); }

bool is_odd_integer64(double y) {
  return y == floor(y) && abs(y) < 9007199254740992.0lf && mod(y, 2.0lf) == 1.0lf;
}

double pow64(double x, double y) {
  if (y == 0.0lf || x == 1.0lf) return 1.0lf;
  if (isnan(x) || isnan(y)) return nan64();
  if (x == 0.0lf) {
    if (y > 0.0lf) return is_odd_integer64(y) ? x : 0.0lf;
    return (is_odd_integer64(y) && x < 0.0lf) ? -inf64() : inf64();
  }
  if (isinf(x) || isinf(y)) {
    double ax = abs(x);
    if (isinf(y)) return ax == 1.0lf ? 1.0lf : ((ax > 1.0lf) == (y > 0.0lf) ? inf64() : 0.0lf);
    double r = y > 0.0lf ? inf64() : 0.0lf;
    return (x < 0.0lf && is_odd_integer64(y)) ? -r : r;
  }
  if (x < 0.0lf && y != floor(y)) return nan64();
  double ax = abs(x);
  double r;
  if (abs(y) <= 1024.0lf) {
    // x^y = x^n * x^f with n = floor(y) by repeated squaring (at most 10 squarings; exact
    // whenever the result is representable, e.g. (-2)^3 = -8) and f = y - n in [0, 1): sqrt for
    // f = 0.5, else exp(f log x), whose argument is small, so rounding errors stay near an ulp.
    double n = floor(y);
    double f = y - n;
    int k = int(abs(n));
    double base = ax;
    r = 1.0lf;
    while (k > 0) {
      if ((k & 1) != 0) r *= base;
      base *= base;
      k >>= 1;
    }
    if (n < 0.0lf) r = 1.0lf / r;
    if (f == 0.5lf) r *= sqrt(ax);
    else if (f != 0.0lf) r *= exp64(f * log64(ax));
  } else {
    r = exp64(y * log64(ax));
  }
  return (x < 0.0lf && is_odd_integer64(y)) ? -r : r;
}

// ---- Trigonometric and hyperbolic functions in f64 -------------------------------------------
// sin/cos: x = n pi/2 + r with pi/2 in three parts (Cody-Waite; accurate for |x| up to ~1e9),
// then minimax polynomials on [-pi/4, pi/4] (the classic fdlibm coefficients).
const double PIO2_1 = 1.57079632673412561417e+00lf;
const double PIO2_2 = 6.07710050630396597660e-11lf;
const double PIO2_3 = 2.02226624871116645580e-21lf;
const double PIO2_HI = 1.57079632679489655800e+00lf;
const double PIO2_LO = 6.12323399573676603587e-17lf;
const double PIO4_HI = 7.85398163397448278999e-01lf;
const double PIO4_LO = 3.06161699786838301793e-17lf;
const double INV_PIO2 = 6.36619772367581382433e-01lf;

double sin_kernel(double r) {
  double z = r * r;
  double p = 1.58969099521155010221e-10lf;
  p = p * z - 2.50507602534068634195e-08lf;
  p = p * z + 2.75573137070700676789e-06lf;
  p = p * z - 1.98412698298579493134e-04lf;
  p = p * z + 8.33333333332248946124e-03lf;
  p = p * z - 1.66666666666666324348e-01lf;
  return r + r * z * p;
}

double cos_kernel(double r) {
  double z = r * r;
  double p = -1.13596475577881948265e-11lf;
  p = p * z + 2.08757232129817482790e-09lf;
  p = p * z - 2.75573143513906633035e-07lf;
  p = p * z + 2.48015872894767294178e-05lf;
  p = p * z - 1.38888888888741095749e-03lf;
  p = p * z + 4.16666666666666019037e-02lf;
  double hz = 0.5lf * z;
  double w = 1.0lf - hz;
  return w + (((1.0lf - w) - hz) + z * z * p);
}

// Returns the quadrant (n mod 4) and the reduced argument.
int reduce_pio2(double x, out double r) {
  double n = floor(x * INV_PIO2 + 0.5lf);
  r = ((x - n * PIO2_1) - n * PIO2_2) - n * PIO2_3;
  return int(mod(n, 4.0lf));
}

// The classic kernels with the reduced argument's tail y (x + y = the exact reduced value):
// this keeps sin and cos within ~0.6 ulp (they agree with glibc on ~97% of random inputs).
double sin_kernel_tail(double x, double y) {
  precise double z = x * x;
  precise double v = z * x;
  precise double r = 8.33333333332248946124e-03lf + z * (-1.98412698298579493134e-04lf +
                     z * (2.75573137070700676789e-06lf + z * (-2.50507602534068634195e-08lf +
                     z * 1.58969099521155010221e-10lf)));
  precise double s = x - ((z * (0.5lf * y - v * r) - y) - v * -1.66666666666666324348e-01lf);
  return s;
}

double cos_kernel_tail(double x, double y) {
  precise double z = x * x;
  precise double r = z * (4.16666666666666019037e-02lf + z * (-1.38888888888741095749e-03lf +
                     z * (2.48015872894767294178e-05lf + z * (-2.75573143513906633035e-07lf +
                     z * (2.08757232129817482790e-09lf + z * -1.13596475577881948265e-11lf)))));
  precise double hz = 0.5lf * z;
  precise double w = 1.0lf - hz;
  precise double c = w + (((1.0lf - w) - hz) + (z * r - x * y));
  return c;
}

// Reduction by pi/2 in two parts, keeping the tail: exact enough for |x| < 2^19 pi/2; beyond,
// the three-part reduction without a tail.
int reduce_pio2_tail(double x, out double y0, out double y1) {
  precise double n = floor(x * INV_PIO2 + 0.5lf);
  if (abs(x) < 823549.6lf) {
    precise double r = x - n * PIO2_1;
    precise double w = n * 6.07710050650619224932e-11lf;
    y0 = r - w;
    y1 = (r - y0) - w;
  } else {
    y0 = ((x - n * PIO2_1) - n * PIO2_2) - n * PIO2_3;
    y1 = 0.0lf;
  }
  return int(mod(n, 4.0lf));
}

double sin64(double x) {
  if (isinf(x) || isnan(x)) return nan64();
  if (abs(x) < 7.450580596923828e-9lf) return x;
  double a, b;
  int q = reduce_pio2_tail(x, a, b);
  if (q == 0) return sin_kernel_tail(a, b);
  if (q == 1) return cos_kernel_tail(a, b);
  if (q == 2) return -sin_kernel_tail(a, b);
  return -cos_kernel_tail(a, b);
}

double cos64(double x) {
  if (isinf(x) || isnan(x)) return nan64();
  double a, b;
  int q = reduce_pio2_tail(x, a, b);
  if (q == 0) return cos_kernel_tail(a, b);
  if (q == 1) return -sin_kernel_tail(a, b);
  if (q == 2) return -cos_kernel_tail(a, b);
  return sin_kernel_tail(a, b);
}

double tan64(double x) {
  if (isinf(x) || isnan(x)) return nan64();
  double r;
  int q = reduce_pio2(x, r);
  double s = sin_kernel(r), c = cos_kernel(r);
  return (q & 1) == 0 ? s / c : -c / s;
}

// atan on [0, tan(pi/8)] by its odd series (21 terms: truncation below 1e-18).
double atan_small(double t) {
  // atan(t) = t - t^3/3 + t^5/5 - ... = t + t z P(z), P(z) = -1/3 + z/5 - z^2/7 + ...
  double z = t * t;
  double p = 0.0lf;
  for (int k = 22; k >= 1; --k) p = p * z + ((k & 1) == 1 ? -1.0lf : 1.0lf) / double(2 * k + 1);
  return t + t * z * p;
}

double atan64(double x) {
  if (isnan(x)) return x;
  double ax = abs(x);
  double r;
  if (ax > 1.0lf) {
    // atan(x) = pi/2 - atan(1/x)
    double inv = 1.0lf / ax;
    double a = inv > 0.41421356237309503lf ? (PIO4_HI + (atan_small((inv - 1.0lf) / (inv + 1.0lf)) + PIO4_LO)) : atan_small(inv);
    r = PIO2_HI - (a - PIO2_LO);
  } else if (ax > 0.41421356237309503lf) {
    r = PIO4_HI + (atan_small((ax - 1.0lf) / (ax + 1.0lf)) + PIO4_LO);
  } else {
    r = atan_small(ax);
  }
  return x < 0.0lf ? -r : r;
}

double atan2_64(double y, double x) {
  if (isnan(x) || isnan(y)) return nan64();
  if (x == 0.0lf && y == 0.0lf) {
    bool neg_x = (doubleBitsToUint64(x) >> 63) != 0ul;
    double base = neg_x ? PIO2_HI * 2.0lf : 0.0lf;
    return (doubleBitsToUint64(y) >> 63) != 0ul ? -base : base;
  }
  if (isinf(x) || isinf(y)) {
    double a;
    if (isinf(x) && isinf(y)) a = x > 0.0lf ? PIO4_HI : 3.0lf * PIO4_HI;
    else if (isinf(y)) a = PIO2_HI;
    else a = x > 0.0lf ? 0.0lf : 2.0lf * PIO2_HI;
    return y < 0.0lf || (y == 0.0lf && (doubleBitsToUint64(y) >> 63) != 0ul) ? -a : a;
  }
  double a = atan64(abs(y / x));
  if (x < 0.0lf) a = (2.0lf * PIO2_HI - a) + 2.0lf * PIO2_LO;
  return y < 0.0lf || (y == 0.0lf && (doubleBitsToUint64(y) >> 63) != 0ul) ? -a : a;
}

double asin64(double x) {
  double ax = abs(x);
  if (isnan(x) || ax > 1.0lf) return nan64();
  if (ax == 1.0lf) return x > 0.0lf ? PIO2_HI : -PIO2_HI;
  // 1 - x^2 as (1 - x)(1 + x): no cancellation near |x| = 1.
  double r = atan64(ax / sqrt((1.0lf - ax) * (1.0lf + ax)));
  return x < 0.0lf ? -r : r;
}

double acos64(double x) {
  if (isnan(x) || abs(x) > 1.0lf) return nan64();
  // acos(x) = 2 atan(sqrt((1 - x) / (1 + x))): accurate on the whole range.
  if (x == -1.0lf) return 2.0lf * PIO2_HI;
  return 2.0lf * atan64(sqrt((1.0lf - x) / (1.0lf + x)));
}

double sinh64(double x) {
  double ax = abs(x);
  if (isnan(x) || x == 0.0lf) return x;
  double r;
  if (ax < 1.0lf) {
    double t = expm1_64(ax);
    r = 0.5lf * (t + t / (t + 1.0lf));
  } else if (ax < 709.0lf) {
    double e = exp64(ax);
    r = 0.5lf * (e - 1.0lf / e);
  } else {
    double e = exp64(0.5lf * ax);
    r = (0.5lf * e) * e;
  }
  return x < 0.0lf ? -r : r;
}

double cosh64(double x) {
  double ax = abs(x);
  if (isnan(x)) return x;
  if (ax < 709.0lf) {
    double e = exp64(ax);
    return 0.5lf * (e + 1.0lf / e);
  }
  double e = exp64(0.5lf * ax);
  return (0.5lf * e) * e;
}

double asinh64(double x) {
  double ax = abs(x);
  if (isnan(x) || isinf(x) || x == 0.0lf) return x;
  double r;
  if (ax > 268435456.0lf) r = log64(ax) + 6.93147180559945286227e-01lf;
  else r = log1p64(ax + ax * ax / (1.0lf + sqrt(1.0lf + ax * ax)));
  return x < 0.0lf ? -r : r;
}

double acosh64(double x) {
  if (isnan(x) || x < 1.0lf) return nan64();
  if (isinf(x)) return x;
  if (x > 268435456.0lf) return log64(x) + 6.93147180559945286227e-01lf;
  double t = x - 1.0lf;
  return log1p64(t + sqrt(2.0lf * t + t * t));
}

double atanh64(double x) {
  double ax = abs(x);
  if (isnan(x) || ax > 1.0lf) return nan64();
  if (ax == 1.0lf) return x > 0.0lf ? inf64() : -inf64();
  double r = 0.5lf * log1p64(2.0lf * ax / (1.0lf - ax));
  return x < 0.0lf ? -r : r;
}

double cbrt64(double x) {
  if (isnan(x) || isinf(x) || x == 0.0lf) return x;
  double ax = abs(x);
  double y = exp64(log64(ax) / 3.0lf);
  // One Newton step on y^3 = ax.
  y = y - (y * y * y - ax) / (3.0lf * y * y);
  return x < 0.0lf ? -y : y;
}

// fmod (C's, as Erlang's :math.fmod): x - trunc(x / y) y with the sign of x, exact when the
// quotient is below 2^52. q y is formed exactly as a double-double (Veltkamp split, Dekker's
// product: GLSL's fma need not be fused), so the subtraction leaves the exact remainder; the
// quotient is corrected by one when the division rounded across an integer.
double split_hi(double a) {
  precise double t = 134217729.0lf * a;  // 2^27 + 1
  precise double hi = t - (t - a);
  return hi;
}

double fmod64(double x, double y) {
  if (isnan(x) || isnan(y) || isinf(x) || y == 0.0lf) return nan64();
  if (isinf(y) || x == 0.0lf) return x;
  precise double ax = abs(x);
  precise double ay = abs(y);
  precise double q = trunc(ax / ay);
  precise double p = q * ay;
  precise double qh = split_hi(q);
  precise double ql = q - qh;
  precise double yh = split_hi(ay);
  precise double yl = ay - yh;
  precise double err = ((qh * yh - p) + qh * yl + ql * yh) + ql * yl;
  precise double r = (ax - p) - err;
  if (r < 0.0lf) r += ay;
  if (r >= ay) r -= ay;
  return x < 0.0lf ? -r : r;
}

// erf and erfc: the Maclaurin series for |x| < 2.5 (cancellation costs ~7 of 53 bits there) and
// a continued fraction for erfc beyond (60 levels, evaluated bottom-up). Good to ~1e-13
// relative: f32 results round exactly; f64 ones are not used yet.
double erf_series(double x) {
  double z = x * x;
  double term = x;
  double sum = x;
  for (int n = 1; n < 60; ++n) {
    term *= -z / double(n);
    sum += term / double(2 * n + 1);
  }
  return 1.12837916709551257390lf * sum;  // 2 / sqrt(pi)
}

double erfc_fraction(double x) {
  // erfc(x) = exp(-x^2) / sqrt(pi) / (x + (1/2) / (x + 1 / (x + (3/2) / (x + 2 / (x + ...)))))
  double f = x;
  for (int k = 60; k >= 1; --k) f = x + (double(k) * 0.5lf) / f;
  return exp64(-x * x) * 0.56418958354775628695lf / f;  // 1 / sqrt(pi)
}

double erf64(double x) {
  if (isnan(x)) return x;
  double ax = abs(x);
  if (ax < 2.5lf) return erf_series(x);
  double r = ax > 6.0lf ? 1.0lf : 1.0lf - erfc_fraction(ax);
  return x < 0.0lf ? -r : r;
}

double erfc64(double x) {
  if (isnan(x)) return x;
  if (x >= 2.5lf) return x > 27.3lf ? 0.0lf : erfc_fraction(x);
  if (x <= -2.5lf) return 2.0lf - (x < -6.0lf ? 0.0lf : erfc_fraction(-x));
  return 1.0lf - erf_series(x);
}

// erf_inv as the complex library (and so Nx.BinaryBackend) computes it: Giles' single-precision
// polynomials in w = -log((1 - x)(1 + x)), evaluated in f64 multiply-then-add steps (`precise`:
// no fused multiply-adds), so f32 results round to the same values.
double erf_inv64(double x) {
  if (isnan(x) || abs(x) > 1.0lf) return nan64();
  if (x == 1.0lf) return inf64();
  if (x == -1.0lf) return -inf64();
  if (x == 0.0lf) return 0.0lf;
  precise double w = -log64((1.0lf - x) * (1.0lf + x));
  precise double p;
  if (w < 5.0lf) {
    w = w - 2.5lf;
    p = 2.81022636e-08lf;
    p = p * w + 3.43273939e-07lf;
    p = p * w + -3.5233877e-06lf;
    p = p * w + -4.39150654e-06lf;
    p = p * w + 0.00021858087lf;
    p = p * w + -0.00125372503lf;
    p = p * w + -0.00417768164lf;
    p = p * w + 0.246640727lf;
    p = p * w + 1.50140941lf;
  } else {
    w = sqrt(w) - 3.0lf;
    p = -0.000200214257lf;
    p = p * w + 0.000100950558lf;
    p = p * w + 0.00134934322lf;
    p = p * w + -0.00367342844lf;
    p = p * w + 0.00573950773lf;
    p = p * w + -0.0076224613lf;
    p = p * w + 0.00943887047lf;
    p = p * w + 1.00167406lf;
    p = p * w + 2.83297682lf;
  }
  precise double r = p * x;
  return r;
}
