// Double-precision transcendentals (GLSL has no f64 exp/log/tanh). Cody-Waite range reduction plus
// polynomials; accurate to about 1 ulp of f64. f32 kernels built with PRECISE route through these,
// then round once to f32, which is what Nx.BinaryBackend does (Erlang's :math is f64).
const double LN2_HI = 6.93147180369123816490e-01lf;
const double LN2_LO = 1.90821492927058770002e-10lf;
const double LOG2E = 1.44269504088896338700e+00lf;
const double SQRT_HALF = 0.70710678118654752440lf;

double nan64() { return uint64BitsToDouble(0x7ff8000000000000ul); }
double inf64() { return uint64BitsToDouble(0x7ff0000000000000ul); }

double exp64(double x) {
  if (isnan(x)) return x;
  if (x > 709.782712893384lf) return inf64();
  if (x < -745.1332191019412lf) return 0.0lf;
  double k = floor(x * LOG2E + 0.5lf);
  double r = (x - k * LN2_HI) - k * LN2_LO;
  // exp(r), |r| <= 0.35: Taylor to r^13 (truncation < 5e-18 relative).
  double p = 1.0lf / 6227020800.0lf;
  p = p * r + 1.0lf / 479001600.0lf;
  p = p * r + 1.0lf / 39916800.0lf;
  p = p * r + 1.0lf / 3628800.0lf;
  p = p * r + 1.0lf / 362880.0lf;
  p = p * r + 1.0lf / 40320.0lf;
  p = p * r + 1.0lf / 5040.0lf;
  p = p * r + 1.0lf / 720.0lf;
  p = p * r + 1.0lf / 120.0lf;
  p = p * r + 1.0lf / 24.0lf;
  p = p * r + 1.0lf / 6.0lf;
  p = p * r + 0.5lf;
  p = p * r * r + r;
  int ki = int(k);
  // Two steps so that results in the subnormal range do not underflow the scale factor.
  int k1 = ki / 2;
  return ldexp(ldexp(1.0lf + p, k1), ki - k1);
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
  if (isnan(x)) return x;
  if (ax > 22.0lf) return sign(x);
  double e = expm1_64(-2.0lf * ax);
  double t = -e / (2.0lf + e);
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
  if (x < 0.0lf) {
    if (y != floor(y)) return nan64();
    double r = exp64(y * log64(-x));
    return is_odd_integer64(y) ? -r : r;
  }
  return exp64(y * log64(x));
}
