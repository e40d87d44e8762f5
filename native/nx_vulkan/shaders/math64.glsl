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
// from main, in uniform control flow, before any early return. On CPUs (lavapipe) the barrier
// costs more than it saves in kernels that never read the table (a binary add), but a kernel
// that reads it runs 3-17x faster with it in shared memory (lavapipe's reads of a constant array
// by a variable index are that slow: exp of 1 M f32 took 140 ms against 40, erf of 256 K 228
// against 14): a shader whose op reads it defines TABLE_IN_SHARED before including this file
// (unary.comp, binary.comp).
layout(constant_id = 1) const bool SHARED_TABLE = false;
#ifndef TABLE_IN_SHARED
#define TABLE_IN_SHARED SHARED_TABLE
#endif
shared double exp2_table_hi[32];
shared double exp2_table_lo[32];

void load_math_tables() {
  if (TABLE_IN_SHARED) {
    uint i = gl_LocalInvocationIndex;
    if (i < 32u) {
      exp2_table_hi[i] = EXP2_J32_HI[i];
      exp2_table_lo[i] = EXP2_J32_LO[i];
    }
    barrier();
  }
}

// Dekker's exact product a b = p + e. The split is done on the bits, not by Veltkamp's
// (2^27 + 1) a - ((2^27 + 1) a - a), which a compiler that fuses a multiply-add (whatever
// `precise` asks) turns into a wrong split: a rounded to its top 26 significant bits (adding
// half the weight of the 27 dropped bits to the pattern and clearing them; a carry into the
// exponent is right too). Then hi and a - hi have at most 26 bits each, every partial product in
// two_prod is exact, and fusing any of them into an addition changes nothing. (GLSL's fma need not
// be fused, so no fma here either.)
double split_hi(double a) {
  uint64_t bits = doubleBitsToUint64(a);
  return uint64BitsToDouble((bits + 0x4000000UL) & ~0x7ffffffUL);
}

void two_prod(double a, double b, out double p, out double e) {
  precise double pp = a * b;
  precise double ah = split_hi(a);
  precise double al = a - ah;
  precise double bh = split_hi(b);
  precise double bl = b - bh;
  precise double err = ((ah * bh - pp) + ah * bl + al * bh) + al * bl;
  p = pp;
  e = err;
}

// exp(x + xt), xt a tail below half an ulp of x (pow passes y log x as a double-double).
double exp64_dd(double x, double xt) {
  if (isnan(x)) return x;
  if (x > 709.782712893384lf) return inf64();
  if (x < -745.1332191019412lf) return 0.0lf;
  // x = (32k + j) ln2/32 + r with |r| <= ln2/64, so exp(x) = 2^k T (1 + r + q), T = 2^(j/32) as a
  // double-double from the table, q = expm1(r) - r. r is kept as r + rlo (exact difference),
  // T r as an exact product, so the only sizeable rounding is the last addition: within 0.5 ulp
  // plus ~2^-64, the correctly rounded value but for the rarest near-ties (glibc's exp is within
  // 0.511 ulp). `precise` forbids FMA fusion so every device rounds the same steps.
  precise double n = floor(x * (32.0lf / 6.93147180559945309417e-01lf) + 0.5lf);
  precise double hi = x - n * (LN2_HI / 32.0lf);
  precise double lo = n * (LN2_LO / 32.0lf) - xt;
  precise double r = hi - lo;
  precise double rlo = (hi - r) - lo;
  precise double q = r * r * (0.5lf + r * (1.0lf / 6.0lf + r * (1.0lf / 24.0lf +
                     r * (1.0lf / 120.0lf + r * (1.0lf / 720.0lf + r * (1.0lf / 5040.0lf))))));
  int ni = int(n);
  int j = ni & 31;
  int k = (ni - j) / 32;
  precise double th = TABLE_IN_SHARED ? exp2_table_hi[j] : EXP2_J32_HI[j];
  precise double tl = TABLE_IN_SHARED ? exp2_table_lo[j] : EXP2_J32_LO[j];
  precise double ph, pe;
  two_prod(th, r, ph, pe);
  precise double sum_hi = th + ph;
  precise double sum_lo = (th - sum_hi) + ph;
  precise double y = sum_hi + (sum_lo + (pe + (th * (rlo + q) + tl * (1.0lf + r))));
  // Two steps so that results in the subnormal range do not underflow the scale factor.
  int k1 = k / 2;
  return ldexp(ldexp(y, k1), k - k1);
}

double exp64(double x) { return exp64_dd(x, 0.0lf); }

// ---- f32 and f16 results, the short way --------------------------------------------------------
// An f32 or f16 op needs exp64's value only as far as its rounding to f32 (or f16, whose rounding
// points are all f32 values). A short evaluation within a few units of the last place of the
// true value rounds the same way unless the value lies within that distance of an f32 value or
// midpoint; there (once in millions) the op takes the full routine (Ziv's strategy). So results
// are exp64's, bit for bit, at a third of the cost (H200, see README).

// Whether y lies within 64 units of its last place of an f32 value or midpoint: bit 28 of the
// mantissa is f32's rounding bit, bits 0-27 what a rounding would drop.
bool near_f32_rounding_point(double y) {
  uint dropped = unpackDouble2x32(y).x & 0x0fffffffu;
  return ((dropped + 64u) & 0x0fffffffu) <= 128u;
}

// exp(x) within ~25 units of the last place for an f32 value x in [-87, 88.5] (normal f32
// results; near_f32_rounding_point allows 64): x = (32k + j) ln2/32 + r (n = 32k + j rounded by
// the 1.5 2^52 shifter, whose sum holds n in its low word; any rounding of x 32/ln2 before the
// shift only moves r a hair past ln2/64), r = x - n ln2_hi/32 exactly (x has 24 bits, n ln2_hi/32
// at most 45) minus n ln2_lo/32, then 2^k T_j (1 + expm1(r)) with expm1 by its Taylor series to
// r^5 (|r| <= ln2/64: the rest is below 2^-48.6), T_j without its low part (2^-53 of it), and
// 2^k added to the exponent bits. Every step tolerates a fused or an unfused multiply-add. Few
// f64 instructions and no conversion but the operand's: the H200 runs precise exp and sigmoid
// at its f64 rate (README).
double exp64_short(double x) {
  const double SHIFTER = 6755399441055744.0lf;
  // `precise`: a compiler free to reassociate would fold the shifter away.
  precise double shifted = fma(x, 32.0lf / 6.93147180559945309417e-01lf, SHIFTER);
  precise double n = shifted - SHIFTER;
  int ni = int(unpackDouble2x32(shifted).x);
  double r = fma(-n, LN2_LO / 32.0lf, fma(-n, LN2_HI / 32.0lf, x));
  double p = fma(r * r, 0.5lf + r * (1.0lf / 6.0lf + r * (1.0lf / 24.0lf + r * (1.0lf / 120.0lf))), r);
  double th = TABLE_IN_SHARED ? exp2_table_hi[ni & 31] : EXP2_J32_HI[ni & 31];
  uvec2 y = unpackDouble2x32(fma(th, p, th));
  y.y += uint(ni >> 5) << 20;
  return packDouble2x32(y);
}

// exp64_short's value and whether it must give way to exp64 (`full`: x outside the short
// evaluation's range, or the value near an f32 rounding point). Straight-line code: a kernel
// that computes several elements evaluates all of them this way first and calls exp64 only
// for those flagged (unary.comp), which on the H200 ran exp 18 us faster per 64 M than a branch
// to exp64 after each element.
double exp64_short_checked(double x, out bool full) {
  bool in_range = x >= -87.0lf && x <= 88.5lf;
  double y = exp64_short(in_range ? x : 0.0lf);
  full = !in_range || near_f32_rounding_point(y);
  return y;
}

// exp64 as an f32 or f16 op needs it (see above).
double exp64_narrow(double x) {
  bool full;
  double y = exp64_short_checked(x, full);
  return full ? exp64(x) : y;
}

// ---- The fdlibm algorithms -------------------------------------------------------------------
// From here on the routines follow the algorithms of Sun's fdlibm, which glibc's libm (and so
// Erlang's :math, and so Nx.BinaryBackend) uses for expm1, log1p, sinh, cosh, tanh, asinh, acosh,
// atanh, erf and erfc; sin, cos, tan, asin, acos and atan are fdlibm's too (< 1 ulp; glibc's own
// are nearly correctly rounded, so the two agree on the vast majority of inputs). Same constants,
// same order of operations, `precise` so that no device fuses a multiply-add fdlibm does not.
// Thresholds compare the high 32 bits of the double, as fdlibm does.
uint high_word(double x) { return unpackDouble2x32(x).y; }
double with_words(uint hi, uint lo) { return packDouble2x32(uvec2(lo, hi)); }
double clear_low_word(double x) { return with_words(high_word(x), 0u); }
// x 2^k for any k in -2100..2100, in two steps so neither factor overflows nor underflows early.
double scale2(double x, int k) {
  int k1 = k / 2;
  return ldexp(ldexp(x, k1), k - k1);
}

const double INVLN2 = 1.44269504088896338700e+00lf;

// expm1 (fdlibm s_expm1.c, with glibc's evaluation order of the rational approximation).
double expm1_64(double x_in) {
  precise double x = x_in;  // reduced in place below: every step must round as written
  const double Q1 = -3.33333333333331316428e-02lf;
  const double Q2 = 1.58730158725481460165e-03lf;
  const double Q3 = -7.93650757867487942473e-05lf;
  const double Q4 = 4.00821782732936239552e-06lf;
  const double Q5 = -2.01099218183624371326e-07lf;
  uint hw = high_word(x);
  bool neg = (hw & 0x80000000u) != 0u;
  uint hx = hw & 0x7fffffffu;
  if (hx >= 0x4043687Au) {  // |x| >= 56 ln2
    if (isnan(x)) return x;
    if (isinf(x)) return neg ? -1.0lf : x;
    if (x > 7.09782712893383973096e+02lf) return inf64();
    if (neg) return -1.0lf;
  }
  precise double hi, lo, c = 0.0lf, t, e, y;
  int k;
  if (hx > 0x3fd62e42u) {  // |x| > 0.5 ln2
    if (hx < 0x3FF0A2B2u) {  // and < 1.5 ln2
      if (!neg) { hi = x - LN2_HI; lo = LN2_LO; k = 1; }
      else { hi = x + LN2_HI; lo = -LN2_LO; k = -1; }
    } else {
      k = int(INVLN2 * x + (neg ? -0.5lf : 0.5lf));
      t = double(k);
      hi = x - t * LN2_HI;
      lo = t * LN2_LO;
    }
    x = hi - lo;
    c = (hi - x) - lo;
  } else if (hx < 0x3c900000u) {  // |x| < 2^-54
    return x;
  } else {
    k = 0;
  }
  precise double hfx = 0.5lf * x;
  precise double hxs = x * hfx;
  precise double R1 = 1.0lf + hxs * Q1;
  precise double h2 = hxs * hxs;
  precise double R2 = Q2 + hxs * Q3;
  precise double h4 = h2 * h2;
  precise double R3 = Q4 + hxs * Q5;
  precise double r1 = R1 + h2 * R2 + h4 * R3;
  t = 3.0lf - r1 * hfx;
  e = hxs * ((r1 - t) / (6.0lf - x * t));
  precise double res;
  if (k == 0) {
    res = x - (x * e - hxs);
    return res;
  }
  e = (x * (e - c) - c);
  e -= hxs;
  if (k == -1) {
    res = 0.5lf * (x - e) - 0.5lf;
    return res;
  }
  if (k == 1) {
    res = x < -0.25lf ? -2.0lf * (e - (x + 0.5lf)) : 1.0lf + 2.0lf * (x - e);
    return res;
  }
  if (k <= -2 || k > 56) {
    y = 1.0lf - (e - x);
    res = scale2(y, k) - 1.0lf;
    return res;
  }
  if (k < 20) {
    t = with_words(0x3ff00000u - (0x200000u >> uint(k)), 0u);  // 1 - 2^-k
    y = t - (e - x);
  } else {
    t = with_words(uint(0x3ff - k) << 20, 0u);  // 2^-k
    y = x - (e + t);
    y += 1.0lf;
  }
  return scale2(y, k);
}

// The log(1 + f) polynomial of fdlibm's log1p.
const double LG1 = 6.666666666666735130e-01lf;
const double LG2 = 3.999999999940941908e-01lf;
const double LG3 = 2.857142874366239149e-01lf;
const double LG4 = 2.222219843214978396e-01lf;
const double LG5 = 1.818357216161805012e-01lf;
const double LG6 = 1.531383769920937332e-01lf;
const double LG7 = 1.479819860511658591e-01lf;

// log as a double-double: log x = k ln2 + 2 atanh(s), s = f / (2 + f), f = m - 1 exact for
// m = x 2^-k in [sqrt(1/2), sqrt(2)). s and the s^3 term are carried as double-doubles; the rest
// of the series is below 2^-12 of the result, so its rounding costs < 2^-64 of it. hi, the
// rounded sum, is the correctly rounded logarithm but for the rarest near-ties: glibc's log
// (within 0.52 ulp) agrees with it on practically every input. x must be finite and > 0.
const double TWO_THIRDS_HI = 0.6666666666666666lf;
const double TWO_THIRDS_LO = 3.700743415417188e-17lf;

void log_dd(double x, out double hi, out double lo) {
  int k = 0;
  uint hx = high_word(x);
  if (hx < 0x00100000u) {  // subnormal: scale by 2^54
    k -= 54;
    x *= 18014398509481984.0lf;
    hx = high_word(x);
  }
  k += int(hx >> 20) - 1023;
  hx &= 0x000fffffu;
  uint i = (hx + 0x95f64u) & 0x100000u;
  precise double m = with_words(hx | (i ^ 0x3ff00000u), unpackDouble2x32(x).x);  // x or x/2
  k += int(i >> 20);
  precise double f = m - 1.0lf;
  precise double d_hi = 2.0lf + f;
  precise double d_lo = f - (d_hi - 2.0lf);
  precise double s_hi = f / d_hi;
  precise double p, pe;
  two_prod(s_hi, d_hi, p, pe);
  precise double s_lo = (((f - p) - pe) - s_hi * d_lo) / d_hi;
  precise double z, ze, c, ce, t, te;
  two_prod(s_hi, s_hi, z, ze);
  two_prod(s_hi, z, c, ce);  // s^3
  ce += s_hi * ze + 3.0lf * z * s_lo;
  two_prod(c, TWO_THIRDS_HI, t, te);  // 2 s^3 / 3
  te += ce * TWO_THIRDS_HI + c * TWO_THIRDS_LO;
  // 2 s (s^4/5 + s^6/7 + ...) = 2 s z^2 sum z^j / (5 + 2j), to j = 12 (z <= 0.0295).
  precise double q = 1.0lf / 29.0lf;
  for (int j = 11; j >= 0; --j) q = q * z + 1.0lf / double(5 + 2 * j);
  precise double tail = 2.0lf * s_hi * (z * z) * q;
  precise double dk = double(k);
  precise double a = dk * LN2_HI;  // exact: LN2_HI has 32 bits
  precise double b = 2.0lf * s_hi;
  precise double h1 = a + b;
  precise double bv = h1 - a;
  precise double l1 = (a - (h1 - bv)) + (b - bv);
  precise double h2 = h1 + t;
  precise double bv2 = h2 - h1;
  precise double l2 = (h1 - (h2 - bv2)) + (t - bv2);
  precise double low = (l1 + l2) + (te + tail + 2.0lf * s_lo + dk * LN2_LO);
  precise double r = h2 + low;
  // `precise` on every step of the tail: GPU compilers otherwise fold (h2 + low) - h2 to low.
  precise double r_tail = low - (r - h2);
  hi = r;
  lo = r_tail;
}

double log64(double x) {
  if (isnan(x)) return x;
  if (x < 0.0lf) return nan64();
  if (x == 0.0lf) return -inf64();
  if (isinf(x)) return x;
  double hi, lo;
  log_dd(x, hi, lo);
  return hi;
}

// log1p as log of 1 + x carried as a double-double: accurate for tiny x (where Nx.BinaryBackend's
// log(1 + x) loses digits) and equal to the correctly rounded log(1 + x) where 1 + x is exact.
double log1p64(double x) {
  if (isnan(x)) return x;
  if (x < -1.0lf) return nan64();
  if (x == -1.0lf) return -inf64();
  if (isinf(x)) return x;
  if (abs(x) < 5.551115123125783e-17lf) return x;  // 2^-54
  precise double u = 1.0lf + x;
  precise double bv = u - 1.0lf;
  precise double ue = (1.0lf - (u - bv)) + (x - bv);
  double h, l;
  log_dd(u, h, l);
  precise double r = h + (l + ue / u);
  return r;
}

// fdlibm's log1p (s_log1p.c, with glibc's evaluation order of the polynomial): what glibc's
// asinh, acosh and atanh call, so they use it too.
double log1p_fdlibm(double x) {
  uint hw = high_word(x);
  uint ax = hw & 0x7fffffffu;
  bool neg = (hw & 0x80000000u) != 0u;
  int k = 1;
  precise double f = 0.0lf, c = 0.0lf, u;
  uint hu = 0u;
  if (isnan(x)) return x;
  if (!neg && hw >= 0x7ff00000u) return x;  // +inf
  if (neg ? true : hw < 0x3FDA827Au) {  // x < 0.41422
    if (neg && ax >= 0x3ff00000u) return x == -1.0lf ? -inf64() : nan64();  // x <= -1
    if (ax < 0x3e200000u) {  // |x| < 2^-29
      if (ax < 0x3c900000u) return x;  // |x| < 2^-54
      precise double r = x - x * x * 0.5lf;
      return r;
    }
    if (!neg || hw <= 0xbfd2bec3u) {  // -0.2929 < x < 0.41422
      k = 0;
      f = x;
      hu = 1u;
    }
  }
  if (k != 0) {
    if (hw < 0x43400000u) {  // x < 2^53
      u = 1.0lf + x;
      hu = high_word(u);
      k = int(hu >> 20) - 1023;
      c = (k > 0) ? 1.0lf - (u - x) : x - (u - 1.0lf);  // correction term
      c /= u;
    } else {
      u = x;
      hu = high_word(u);
      k = int(hu >> 20) - 1023;
      c = 0.0lf;
    }
    hu &= 0x000fffffu;
    if (hu < 0x6a09eu) {
      u = with_words(hu | 0x3ff00000u, unpackDouble2x32(u).x);  // normalize u
    } else {
      k += 1;
      u = with_words(hu | 0x3fe00000u, unpackDouble2x32(u).x);  // normalize u/2
      hu = (0x00100000u - hu) >> 2;
    }
    f = u - 1.0lf;
  }
  precise double hfsq = 0.5lf * f * f;
  precise double dk = double(k);
  if (hu == 0u) {  // |f| < 2^-20
    if (f == 0.0lf) {
      if (k == 0) return 0.0lf;
      c += dk * LN2_LO;
      return dk * LN2_HI + c;
    }
    precise double r_poly = hfsq * (1.0lf - 0.66666666666666666lf * f);
    if (k == 0) return f - r_poly;
    return dk * LN2_HI - ((r_poly - (dk * LN2_LO + c)) - f);
  }
  precise double s = f / (2.0lf + f);
  precise double z = s * s;
  precise double R1 = z * LG1;
  precise double z2 = z * z;
  precise double R2 = LG2 + z * LG3;
  precise double z4 = z2 * z2;
  precise double R3 = LG4 + z * LG5;
  precise double z6 = z4 * z2;
  precise double R4 = LG6 + z * LG7;
  precise double r_poly = R1 + z2 * R2 + z4 * R3 + z6 * R4;
  if (k == 0) return f - (hfsq - s * (hfsq + r_poly));
  return dk * LN2_HI - ((hfsq - (s * (hfsq + r_poly) + (dk * LN2_LO + c))) - f);
}

// tanh (fdlibm s_tanh.c).
double tanh64(double x) {
  uint ix = high_word(x) & 0x7fffffffu;
  if (isnan(x)) return x;
  precise double z;
  if (ix < 0x40360000u) {  // |x| < 22
    if (ix < 0x3c800000u) return x;  // |x| < 2^-55
    double ax = abs(x);
    if (ix >= 0x3ff00000u) {  // |x| >= 1
      precise double t = expm1_64(2.0lf * ax);
      z = 1.0lf - 2.0lf / (t + 2.0lf);
    } else {
      precise double t = expm1_64(-2.0lf * ax);
      z = -t / (t + 2.0lf);
    }
  } else {
    z = 1.0lf;
  }
  return x < 0.0lf ? -z : z;
}

double sigmoid64(double x) { return 1.0lf / (1.0lf + exp64(-x)); }

// 1 / d for d in [1, 2] within ~2 units of the last place, with no division (GLSL's f64
// division is a long subroutine on GPUs) and three f64 operations: the H200 runs precise sigmoid
// at its f64 rate, and a polynomial seed with Newton steps took 8 or 9. The seed is an f32
// reciprocal (within 2.5 units of f32's last place, Vulkan's bound) of d's leading 24 bits,
// moved between the formats on the bits (conversion instructions run at a quarter of the f64
// rate): relative error below 2^-21.9, so one cubic Newton step r (1 + e + e^2), e = 1 - d r,
// leaves less than 2^-65 before its own rounding.
double recip_1_2(double d) {
  uvec2 w = unpackDouble2x32(d);
  // d's exponent (1023 or 1024) rebased to f32's, its mantissa's top 23 bits below it.
  float f = uintBitsToFloat(((w.y - (896u << 20)) << 3) | (w.x >> 29));
  uint b = floatBitsToUint(1.0 / f);  // in [0.5, 1]: a positive normal f32
  double r = packDouble2x32(uvec2(b << 29, (b >> 3) + (896u << 20)));
  double e = fma(-d, r, 1.0lf);
  return fma(r, fma(e, e, e), r);
}

// sigmoid64's short value as an f32 or f16 op needs it (see exp64_short_checked), and whether
// sigmoid64 must replace it. With t = exp(-|x|) in (0, 1] and s = 1 / (1 + t), sigmoid(x) is s
// for x >= 0 and t s for x < 0: exp within ~25 units, the sum, a reciprocal within ~2 units and
// the product keep the short value within ~30 units (the check allows 64). Above 40,
// exp(-x) < 2^-57 and sigmoid64 gives 1 exactly; below -87 the result is not a normal f32.
double sigmoid64_short_checked(double x, out bool full) {
  bool one = x > 40.0lf;
  bool in_range = x >= -87.0lf;
  double t = exp64_short(in_range && !one ? -abs(x) : 0.0lf);
  double s = recip_1_2(1.0lf + t);
  double y = x < 0.0lf ? t * s : s;
  full = !one && (!in_range || near_f32_rounding_point(y));
  return one ? 1.0lf : y;
}

double sigmoid64_narrow(double x) {
  bool full;
  double y = sigmoid64_short_checked(x, full);
  return full ? sigmoid64(x) : y;
}

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
  // x^y = exp(y log|x|) with log|x| a double-double (log_dd) and y log|x| formed exactly, so the
  // only sizeable errors are exp's final rounding and 2^-64 of y log|x|: within ~0.53 ulp, and
  // exact whenever the result is representable (e.g. (-2)^3 = -8, 10^-2 rounds as glibc's).
  double lh, ll;
  log_dd(abs(x), lh, ll);
  precise double p, pe;
  two_prod(y, lh, p, pe);
  pe += y * ll;
  precise double r = exp64_dd(p, pe);
  return (x < 0.0lf && is_odd_integer64(y)) ? -r : r;
}

// ---- Trigonometric functions in f64 ----------------------------------------------------------
// Argument reduction x = n pi/2 + (y0 + y1), y1 the tail of the reduced argument (fdlibm's
// e_rem_pio2.c): Cody-Waite with up to three refinements below 2^20 pi/2, Payne-Hanek beyond,
// so sin(1e300) is as good as sin(1). Kernels on [-pi/4, pi/4] with the tail (fdlibm k_*.c).
const double PIO2_HI = 1.57079632679489655800e+00lf;
const double PIO2_LO = 6.12323399573676603587e-17lf;
const double PIO4_HI = 7.85398163397448278999e-01lf;
const double PIO4_LO = 3.06161699786838301793e-17lf;
const double INV_PIO2 = 6.36619772367581382433e-01lf;
const double PIO2_1 = 1.57079632673412561417e+00lf;   // first 33 bits of pi/2
const double PIO2_1T = 6.07710050650619224932e-11lf;  // pi/2 - PIO2_1
const double PIO2_2 = 6.07710050630396597660e-11lf;   // second 33 bits of pi/2
const double PIO2_2T = 2.02226624879595063154e-21lf;  // pi/2 - (PIO2_1 + PIO2_2)
const double PIO2_3 = 2.02226624871116645580e-21lf;   // third 33 bits of pi/2
const double PIO2_3T = 8.47842766036889956997e-32lf;  // pi/2 - (PIO2_1 + PIO2_2 + PIO2_3)

int exponent_field(double x) { return int((high_word(x) >> 20) & 0x7ffu); }

// 2/pi, 32 bits a word, behind 64 zero bits (so bit i after the point is bit 63 + i here).
const uint TWO_OVER_PI[40] = uint[40](0u, 0u,
  0xA2F9836Eu, 0x4E441529u, 0xFC2757D1u, 0xF534DDC0u, 0xDB629599u, 0x3C439041u, 0xFE5163ABu,
  0xDEBBC561u, 0xB7246E3Au, 0x424DD2E0u, 0x06492EEAu, 0x09D1921Cu, 0xFE1DEB1Cu, 0xB129A73Eu,
  0xE88235F5u, 0x2EBB4484u, 0xE99C7026u, 0xB45F7E41u, 0x3991D639u, 0x835339F4u, 0x9C845F8Bu,
  0xBDF9283Bu, 0x1FF897FFu, 0xDE05980Fu, 0xEF2F118Bu, 0x5A0A6D1Fu, 0x6D367ECFu, 0x27CB09B7u,
  0x4F463F66u, 0x9E5FEA2Du, 0x7527BAC7u, 0xEBE5F17Bu, 0x3D0739F7u, 0x8A5292EAu, 0x6BFB5FB1u,
  0x1F8D5D08u, 0x56033046u, 0xFC7B6BABu);

// The reduction of |x| to n pi/2 + r0 + r1, given the sign of x back: the quadrant n mod 4.
int quadrant(double x, int n, double r0, double r1, out double y0, out double y1) {
  bool neg = x < 0.0lf;
  y0 = neg ? -r0 : r0;
  y1 = neg ? -r1 : r1;
  return (neg ? -n : n) & 3;
}

// One more Cody-Waite step: takes fn c off r, the rounding of that folded into w with fn ct.
void cody_waite_step(double fn, double c, double ct, inout double r, out double w) {
  precise double t = r;
  precise double product = fn * c;
  precise double rest = t - product;
  precise double tail = fn * ct - ((t - rest) - product);
  r = rest;
  w = tail;
}

// Payne-Hanek for |x| >= 2^20 pi/2. x = M 2^e with M the 53-bit integer significand; bits of 2/pi
// before bit e - 1 only add multiples of 4 to x 2/pi, bits after bit e + 190 less than 2^-130.
// So x 2/pi mod 4 = (M W) 2^-190 with W those 192 bits: an exact 245-bit product in 32-bit limbs
// whose bits 190-191 are the quadrant and the next 124 the fraction, times pi/2 in double-double.
int reduce_pio2_large(double x, out double y0, out double y1) {
  uvec2 words = unpackDouble2x32(x);
  int e = int((words.y >> 20) & 0x7ffu) - 1075;
  uint m0 = words.x;
  uint m1 = (words.y & 0x000fffffu) | 0x00100000u;
  int first = e + 62;  // bit e - 1 of 2/pi in TWO_OVER_PI
  int q = first >> 5;
  int sh = first & 31;
  uint win[6];  // win[0] least significant
  for (int j = 0; j < 6; ++j) {
    uint a = TWO_OVER_PI[q + 5 - j];
    uint b = TWO_OVER_PI[q + 6 - j];
    win[j] = sh == 0 ? a : (a << sh) | (b >> (32 - sh));
  }
  uint64_t t0[6];
  uint64_t t1[6];
  for (int j = 0; j < 6; ++j) {
    t0[j] = uint64_t(win[j]) * uint64_t(m0);
    t1[j] = uint64_t(win[j]) * uint64_t(m1);
  }
  uint p[8];
  uint64_t carry = 0ul;
  for (int c = 0; c < 8; ++c) {
    uint64_t s = carry;
    if (c < 6) s += t0[c] & 0xffffffffu;
    if (c >= 1 && c <= 6) s += (t0[c - 1] >> 32) + (t1[c - 1] & 0xffffffffu);
    if (c >= 2) s += t1[c - 2] >> 32;
    p[c] = uint(s & 0xffffffffu);
    carry = s >> 32;
  }
  int n = int(p[5] >> 30);
  // The fraction's top 62 bits as a signed integer (minus one when it is >= 1/2, so the
  // reduced argument lies in [-pi/4, pi/4]), then the next 64 bits.
  int64_t top = int64_t((uint64_t(p[5] & 0x3fffffffu) << 32) | uint64_t(p[4]));
  if ((p[5] & 0x20000000u) != 0u) {
    top -= int64_t(1) << 62;
    n += 1;
  }
  precise double top_hi = double(top);
  precise double top_lo = double(top - int64_t(top_hi));
  precise double hi = top_hi * 2.168404344971009e-19lf;  // 2^-62
  precise double lo = top_lo * 2.168404344971009e-19lf +
                      (double(p[3]) * 5.048709793414476e-29lf + double(p[2]) * 1.1754943508222875e-38lf);
  // Renormalise (Knuth's two-sum), then times pi/2.
  precise double fh = hi + lo;
  precise double bv = fh - hi;
  precise double fl = (hi - (fh - bv)) + (lo - bv);
  precise double ph, pl;
  two_prod(fh, PIO2_HI, ph, pl);
  precise double t = pl + (fh * PIO2_LO + fl * PIO2_HI);
  precise double r0 = ph + t;
  precise double r1 = t - (r0 - ph);
  return quadrant(x, n, r0, r1, y0, y1);
}

// Returns the quadrant (n mod 4); x = n pi/2 + y0 + y1.
int reduce_pio2(double x, out double y0, out double y1) {
  uint ix = high_word(x) & 0x7fffffffu;
  if (ix > 0x413921fbu) return reduce_pio2_large(x, y0, y1);
  precise double t = abs(x);
  int n = int(t * INV_PIO2 + 0.5lf);
  precise double fn = double(n);
  precise double r = t - fn * PIO2_1;
  precise double w = fn * PIO2_1T;  // good to 85 bits
  int j = int(ix >> 20);
  precise double r0 = r - w;
  if (j - exponent_field(r0) > 16) {  // cancellation: second iteration, good to 118 bits
    cody_waite_step(fn, PIO2_2, PIO2_2T, r, w);
    r0 = r - w;
    if (j - exponent_field(r0) > 49) {  // third, 151 bits
      cody_waite_step(fn, PIO2_3, PIO2_3T, r, w);
      r0 = r - w;
    }
  }
  precise double r1 = (r - r0) - w;
  return quadrant(x, n, r0, r1, y0, y1);
}

double sin_kernel(double x, double y) {
  precise double z = x * x;
  precise double v = z * x;
  precise double r = 8.33333333332248946124e-03lf + z * (-1.98412698298579493134e-04lf +
                     z * (2.75573137070700676789e-06lf + z * (-2.50507602534068634195e-08lf +
                     z * 1.58969099521155010221e-10lf)));
  precise double s = x - ((z * (0.5lf * y - v * r) - y) - v * -1.66666666666666324348e-01lf);
  return s;
}

double cos_kernel(double x, double y) {
  precise double z = x * x;
  precise double r = z * (4.16666666666666019037e-02lf + z * (-1.38888888888741095749e-03lf +
                     z * (2.48015872894767294178e-05lf + z * (-2.75573143513906633035e-07lf +
                     z * (2.08757232129817482790e-09lf + z * -1.13596475577881948265e-11lf)))));
  precise double hz = 0.5lf * z;
  precise double w = 1.0lf - hz;
  precise double c = w + (((1.0lf - w) - hz) + (z * r - x * y));
  return c;
}

// tan (iy = 1) or -1/tan (iy = -1) of x + y, |x + y| <= pi/4 (fdlibm k_tan.c).
double tan_kernel(double x, double y, int iy) {
  const double TK[13] = double[13](
    3.33333333333334091986e-01lf, 1.33333333333201242699e-01lf, 5.39682539762260521377e-02lf,
    2.18694882948595424599e-02lf, 8.86323982359930005737e-03lf, 3.59207910759131235356e-03lf,
    1.45620945432529025516e-03lf, 5.88041240820264096874e-04lf, 2.46463134818469906812e-04lf,
    7.81794442939557092300e-05lf, 7.14072491382608190305e-05lf, -1.85586374855275456654e-05lf,
    2.59073051863633712884e-05lf);
  uint hx = high_word(x);
  uint ix = hx & 0x7fffffffu;
  precise double z, r, v, w, s, a, t;
  if (ix < 0x3e300000u) {  // |x| < 2^-28
    if (iy == 1) return x;
    if (x == 0.0lf) return 1.0lf / abs(x);  // fdlibm's +inf
    // -1/(x + y), carefully
    z = w = x + y;
    z = clear_low_word(z);
    v = y - (z - x);
    t = a = -1.0lf / w;
    t = clear_low_word(t);
    s = 1.0lf + t * z;
    return t + a * (s + t * v);
  }
  bool big = ix >= 0x3FE59428u;  // |x| >= 0.6744
  if (big) {
    if ((hx & 0x80000000u) != 0u) { x = -x; y = -y; }
    z = PIO4_HI - x;
    w = PIO4_LO - y;
    x = z + w;
    y = 0.0lf;
  }
  z = x * x;
  w = z * z;
  r = TK[1] + w * (TK[3] + w * (TK[5] + w * (TK[7] + w * (TK[9] + w * TK[11]))));
  v = z * (TK[2] + w * (TK[4] + w * (TK[6] + w * (TK[8] + w * (TK[10] + w * TK[12])))));
  s = z * x;
  r = y + z * (s * (r + v) + y);
  r += TK[0] * s;
  w = x + r;
  if (big) {
    v = double(iy);
    precise double res = (1.0lf - double((hx >> 30) & 2u)) * (v - 2.0lf * (x - (w * w / (w + v) - r)));
    return res;
  }
  if (iy == 1) return w;
  // -1/(x + r), carefully
  z = clear_low_word(w);
  v = r - (z - x);
  t = a = -1.0lf / w;
  t = clear_low_word(t);
  s = 1.0lf + t * z;
  return t + a * (s + t * v);
}

double sin64(double x) {
  if (isinf(x) || isnan(x)) return nan64();
  if (abs(x) < 7.450580596923828e-9lf) return x;
  double a, b;
  int q = reduce_pio2(x, a, b);
  if (q == 0) return sin_kernel(a, b);
  if (q == 1) return cos_kernel(a, b);
  if (q == 2) return -sin_kernel(a, b);
  return -cos_kernel(a, b);
}

double cos64(double x) {
  if (isinf(x) || isnan(x)) return nan64();
  double a, b;
  int q = reduce_pio2(x, a, b);
  if (q == 0) return cos_kernel(a, b);
  if (q == 1) return -sin_kernel(a, b);
  if (q == 2) return -cos_kernel(a, b);
  return sin_kernel(a, b);
}

double tan64(double x) {
  if (isinf(x) || isnan(x)) return nan64();
  double a, b;
  int q = reduce_pio2(x, a, b);
  return tan_kernel(a, b, (q & 1) == 0 ? 1 : -1);
}

// atan (fdlibm s_atan.c): atan(x) = atan(c) + atan((x - c) / (1 + x c)) for c in
// {1/2, 1, 3/2, inf}, then an odd polynomial on |t| < 7/16.
double atan64(double x) {
  const double ATANHI[4] = double[4](4.63647609000806093515e-01lf, 7.85398163397448278999e-01lf,
                                     9.82793723247329054082e-01lf, 1.57079632679489655800e+00lf);
  const double ATANLO[4] = double[4](2.26987774529616870924e-17lf, 3.06161699786838301793e-17lf,
                                     1.39033110312309984516e-17lf, 6.12323399573676603587e-17lf);
  const double ATK[11] = double[11](
    3.33333333333329318027e-01lf, -1.99999999998764832476e-01lf, 1.42857142725034663711e-01lf,
    -1.11111104054623557880e-01lf, 9.09088713343650656196e-02lf, -7.69187620504482999495e-02lf,
    6.66107313738753120669e-02lf, -5.83357013379057348645e-02lf, 4.97687799461593236017e-02lf,
    -3.65315727442169155270e-02lf, 1.62858201153657823623e-02lf);
  uint hx = high_word(x);
  uint ix = hx & 0x7fffffffu;
  bool neg = (hx & 0x80000000u) != 0u;
  if (ix >= 0x44100000u) {  // |x| >= 2^66
    if (isnan(x)) return x;
    precise double big = ATANHI[3] + ATANLO[3];
    return neg ? -big : big;
  }
  int id;
  precise double t = x;
  if (ix < 0x3fdc0000u) {  // |x| < 7/16
    if (ix < 0x3e200000u) return x;  // |x| < 2^-29
    id = -1;
  } else {
    t = abs(x);
    if (ix < 0x3ff30000u) {  // |x| < 19/16
      if (ix < 0x3fe60000u) { id = 0; t = (2.0lf * t - 1.0lf) / (2.0lf + t); }  // < 11/16
      else { id = 1; t = (t - 1.0lf) / (t + 1.0lf); }
    } else {
      if (ix < 0x40038000u) { id = 2; t = (t - 1.5lf) / (1.0lf + 1.5lf * t); }  // < 39/16
      else { id = 3; t = -1.0lf / t; }
    }
  }
  precise double z = t * t;
  precise double w = z * z;
  precise double s1 = z * (ATK[0] + w * (ATK[2] + w * (ATK[4] + w * (ATK[6] + w * (ATK[8] + w * ATK[10])))));
  precise double s2 = w * (ATK[1] + w * (ATK[3] + w * (ATK[5] + w * (ATK[7] + w * ATK[9]))));
  if (id < 0) {
    precise double r = t - t * (s1 + s2);
    return r;
  }
  precise double r = ATANHI[id] - ((t * (s1 + s2) - ATANLO[id]) - t);
  return neg ? -r : r;
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

// The asin/acos rational approximation of fdlibm (e_asin.c, e_acos.c): asin(x) = x + x R(x^2).
double asin_rational(double t) {
  precise double p = t * (1.66666666666666657415e-01lf + t * (-3.25565818622400915405e-01lf +
                     t * (2.01212532134862925881e-01lf + t * (-4.00555345006794114027e-02lf +
                     t * (7.91534994289814532176e-04lf + t * 3.47933107596021167570e-05lf)))));
  precise double q = 1.0lf + t * (-2.40339491173441421878e+00lf + t * (2.02094576023350569471e+00lf +
                     t * (-6.88283971605453293030e-01lf + t * 7.70381505559019352791e-02lf)));
  precise double r = p / q;
  return r;
}

double asin64(double x) {
  uint hx = high_word(x);
  uint ix = hx & 0x7fffffffu;
  if (isnan(x)) return x;
  if (ix >= 0x3ff00000u) {  // |x| >= 1
    if (abs(x) == 1.0lf) {
      precise double r = x * PIO2_HI + x * PIO2_LO;
      return r;
    }
    return nan64();
  }
  if (ix < 0x3fe00000u) {  // |x| < 0.5
    if (ix < 0x3e400000u) return x;  // |x| < 2^-27
    precise double r = x + x * asin_rational(x * x);
    return r;
  }
  precise double w = 1.0lf - abs(x);
  precise double t = w * 0.5lf;
  precise double s = sqrt(t);
  precise double res;
  if (ix >= 0x3FEF3333u) {  // |x| > 0.975
    res = PIO2_HI - (2.0lf * (s + s * asin_rational(t)) - PIO2_LO);
  } else {
    precise double sw = clear_low_word(s);
    precise double c = (t - sw * sw) / (s + sw);
    precise double p = 2.0lf * s * asin_rational(t) - (PIO2_LO - 2.0lf * c);
    precise double q = PIO4_HI - 2.0lf * sw;
    res = PIO4_HI - (p - q);
  }
  return (hx & 0x80000000u) != 0u ? -res : res;
}

double acos64(double x) {
  const double PI_HI = 3.14159265358979311600e+00lf;
  uint hx = high_word(x);
  uint ix = hx & 0x7fffffffu;
  if (isnan(x)) return x;
  if (ix >= 0x3ff00000u) {  // |x| >= 1
    if (x == 1.0lf) return 0.0lf;
    if (x == -1.0lf) {
      precise double r = PI_HI + 2.0lf * PIO2_LO;
      return r;
    }
    return nan64();
  }
  if (ix < 0x3fe00000u) {  // |x| < 0.5
    if (ix <= 0x3c600000u) {  // |x| < 2^-57
      precise double r = PIO2_HI + PIO2_LO;
      return r;
    }
    precise double r = PIO2_HI - (x - (PIO2_LO - x * asin_rational(x * x)));
    return r;
  }
  if ((hx & 0x80000000u) != 0u) {  // x <= -0.5
    precise double z = (1.0lf + x) * 0.5lf;
    precise double s = sqrt(z);
    precise double w = asin_rational(z) * s - PIO2_LO;
    precise double r = PI_HI - 2.0lf * (s + w);
    return r;
  }
  precise double z = (1.0lf - x) * 0.5lf;  // x >= 0.5
  precise double s = sqrt(z);
  precise double df = clear_low_word(s);
  precise double c = (z - df * df) / (s + df);
  precise double w = asin_rational(z) * s + c;
  precise double r = 2.0lf * (df + w);
  return r;
}

// ---- Hyperbolic functions in f64 (glibc's e_sinh.c, e_cosh.c, s_asinh.c, e_acosh.c, e_atanh.c)
const double LN2 = 6.93147180559945286227e-01lf;

double sinh64(double x) {
  uint hx = high_word(x);
  uint ix = hx & 0x7fffffffu;
  if (ix >= 0x7ff00000u) return x;  // inf, nan
  precise double h = (hx & 0x80000000u) != 0u ? -0.5lf : 0.5lf;
  double ax = abs(x);
  if (ix < 0x40360000u) {  // |x| < 22
    if (ix < 0x3e300000u) return x;  // |x| < 2^-28
    precise double t = expm1_64(ax);
    if (ix < 0x3ff00000u) {
      precise double r = h * (2.0lf * t - t * t / (t + 1.0lf));
      return r;
    }
    precise double r = h * (t + t / (t + 1.0lf));
    return r;
  }
  if (ix < 0x40862e42u) {  // |x| < log(DBL_MAX)
    precise double r = h * exp64(ax);
    return r;
  }
  if (ax <= 7.10475860073943863426e+02lf) {  // overflow threshold
    precise double w = exp64(0.5lf * ax);
    precise double t = h * w;
    precise double r = t * w;
    return r;
  }
  return h > 0.0lf ? inf64() : -inf64();
}

double cosh64(double x) {
  uint ix = high_word(x) & 0x7fffffffu;
  if (isnan(x)) return x;
  double ax = abs(x);
  if (ix < 0x40360000u) {  // |x| < 22
    if (ix < 0x3fd62e43u) {  // |x| < ln2 / 2
      if (ix < 0x3c800000u) return 1.0lf;
      precise double t = expm1_64(ax);
      precise double w = 1.0lf + t;
      precise double r = 1.0lf + (t * t) / (w + w);
      return r;
    }
    precise double t = exp64(ax);
    precise double r = 0.5lf * t + 0.5lf / t;
    return r;
  }
  if (ix < 0x40862e42u) {
    precise double r = 0.5lf * exp64(ax);
    return r;
  }
  if (ax <= 7.10475860073943863426e+02lf) {
    precise double w = exp64(0.5lf * ax);
    precise double t = 0.5lf * w;
    precise double r = t * w;
    return r;
  }
  return inf64();
}

double asinh64(double x) {
  uint hx = high_word(x);
  uint ix = hx & 0x7fffffffu;
  if (ix >= 0x7ff00000u) return x;  // inf, nan
  if (ix < 0x3e300000u) return x;   // |x| < 2^-28
  double ax = abs(x);
  precise double w;
  if (ix > 0x41b00000u) {  // |x| > 2^28
    w = log64(ax) + LN2;
  } else if (ix > 0x40000000u) {  // 2 < |x| <= 2^28
    precise double t = ax;
    w = log64(2.0lf * t + 1.0lf / (sqrt(x * x + 1.0lf) + t));
  } else {
    precise double t = x * x;
    w = log1p_fdlibm(ax + t / (1.0lf + sqrt(1.0lf + t)));
  }
  return (hx & 0x80000000u) != 0u ? -w : w;
}

double acosh64(double x) {
  uint hx = high_word(x);
  if (isnan(x)) return x;
  if (x < 1.0lf) return nan64();
  if (hx >= 0x41b00000u) {  // x >= 2^28
    if (isinf(x)) return x;
    precise double r = log64(x) + LN2;
    return r;
  }
  if (x == 1.0lf) return 0.0lf;
  if (hx > 0x40000000u) {  // 2 < x < 2^28
    precise double t = x * x;
    precise double r = log64(2.0lf * x - 1.0lf / (x + sqrt(t - 1.0lf)));
    return r;
  }
  precise double t = x - 1.0lf;  // 1 < x <= 2
  precise double r = log1p_fdlibm(t + sqrt(2.0lf * t + t * t));
  return r;
}

double atanh64(double x) {
  if (isnan(x)) return x;
  precise double xa = abs(x);
  precise double t;
  if (xa < 0.5lf) {
    if (xa < 3.725290298461914e-09lf) return x;  // 2^-28
    t = xa + xa;
    t = 0.5lf * log1p_fdlibm(t + t * xa / (1.0lf - xa));
  } else if (xa < 1.0lf) {
    t = 0.5lf * log1p_fdlibm((xa + xa) / (1.0lf - xa));
  } else if (xa > 1.0lf) {
    return nan64();
  } else {
    return x > 0.0lf ? inf64() : -inf64();
  }
  return x < 0.0lf ? -t : t;
}

// cbrt as Nx.BinaryBackend computes it: :math.pow(|x|, 1/3) with the sign of x, where 1/3 is the
// double 1/3 - D, D = 2^-54 / 3. So the result is cbrt(|x|) |x|^-D = cbrt(|x|) (1 - D log|x|) to
// far below an ulp: the cube root refined by a Newton step in double-double, times that factor,
// rounded once (glibc's pow is within 0.52 ulp, nearly always the correctly rounded value).
double cbrt64(double x) {
  if (isnan(x) || isinf(x) || x == 0.0lf) return x;
  precise double ax = abs(x);
  precise double xs = ax;
  int adjust = 0;
  if (high_word(ax) < 0x00100000u) {  // subnormal: scale by 2^162 = (2^54)^3
    xs *= 5.846006549323611672814739e48lf;
    adjust = -54;
  }
  int e = exponent_field(xs) - 1023;
  int k = -(e / 3);
  xs = ldexp(xs, 3 * k);  // in [1/8, 8)
  precise double c0 = exp64(log64(xs) / 3.0lf);
  precise double sh, sl, th, tl;
  two_prod(c0, c0, sh, sl);
  two_prod(sh, c0, th, tl);
  tl += sl * c0;
  precise double residual = (xs - th) - tl;
  precise double correction = residual / (3.0lf * c0 * c0);
  precise double d_log = 1.850371707708594e-17lf * log64(ax);  // D log|x|
  precise double y = c0 + (correction - c0 * d_log);
  y = ldexp(y, adjust - k);
  return x < 0.0lf ? -y : y;
}

// fmod (C's, as Erlang's :math.fmod): x - trunc(x / y) y with the sign of x, which is always
// representable. Computed on the integer significands (long division, 11 quotient bits per step,
// as C libraries do), so no floating-point operation is involved and no shader compiler can
// change the answer by fusing or reordering. x = mx 2^(ex - 1075), y = my 2^(ey - 1075) with
// ex, ey >= 1 (subnormals have ex = 1 and no implicit bit); the remainder of mx 2^(ex - ey) by my,
// scaled by 2^(ey - 1075), is the result.
double fmod64(double x, double y) {
  const uint64_t FRAC = 0x000fffffffffffffUL, ONE = 0x0010000000000000UL;
  uint64_t ux = doubleBitsToUint64(x), uy = doubleBitsToUint64(y);
  uint64_t sign = ux & 0x8000000000000000UL;
  uint64_t ax = ux ^ sign, ay = uy & 0x7fffffffffffffffUL;
  if (ax >= 0x7ff0000000000000UL || ay > 0x7ff0000000000000UL || ay == 0UL) return nan64();
  if (ax < ay) return x;                           // |x| < |y| (y = Inf included): x itself
  if (ax == ay) return uint64BitsToDouble(sign);   // zero with x's sign
  int ex = int(ax >> 52), ey = int(ay >> 52);
  uint64_t mx = (ax & FRAC) | (ex != 0 ? ONE : 0UL), my = (ay & FRAC) | (ey != 0 ? ONE : 0UL);
  ex = max(ex, 1); ey = max(ey, 1);
  uint64_t r = mx % my;
  for (int d = ex - ey; d > 0; ) {                 // r < my < 2^53, so r << 11 fits in 64 bits
    int s = min(d, 11);
    r = (r << s) % my;
    d -= s;
  }
  if (r == 0UL) return uint64BitsToDouble(sign);
  uvec2 w = unpackUint2x32(r);
  int msb = w.y != 0u ? 32 + findMSB(w.y) : findMSB(w.x);
  int e = ey, shift = min(52 - msb, e - 1);        // normalise, down to the subnormal range
  r <<= shift;
  e -= shift;
  uint64_t bits = r >= ONE ? (uint64_t(e) << 52) | (r & FRAC) : r;
  return uint64BitsToDouble(bits | sign);
}

// ---- erf and erfc in f64 (fdlibm s_erf.c, with glibc's evaluation order) -------------------
const double ERX = 8.45062911510467529297e-01lf;
const double EFX = 1.28379167095512586316e-01lf;

// erf(x) = x + x R(x^2) on |x| < 0.84375.
double erf_small(double x, double z) {
  const double pp0 = 1.28379167095512558561e-01lf, pp1 = -3.25042107247001499370e-01lf,
               pp2 = -2.84817495755985104766e-02lf, pp3 = -5.77027029648944159157e-03lf,
               pp4 = -2.37630166566501626084e-05lf, qq1 = 3.97917223959155352819e-01lf,
               qq2 = 6.50222499887672944485e-02lf, qq3 = 5.08130628187576562776e-03lf,
               qq4 = 1.32494738004321644526e-04lf, qq5 = -3.96022827877536812320e-06lf;
  precise double r1 = pp0 + z * pp1;
  precise double z2 = z * z;
  precise double r2 = pp2 + z * pp3;
  precise double z4 = z2 * z2;
  precise double s1 = 1.0lf + z * qq1;
  precise double s2 = qq2 + z * qq3;
  precise double s3 = qq4 + z * qq5;
  precise double r = r1 + z2 * r2 + z4 * pp4;
  precise double s = s1 + z2 * s2 + z4 * s3;
  precise double y = r / s;
  return y;
}

// erf(1 + s) - erx = P(s) / Q(s) on 0.84375 <= |x| < 1.25, s = |x| - 1.
double erf_near_one(double s) {
  const double pa0 = -2.36211856075265944077e-03lf, pa1 = 4.14856118683748331666e-01lf,
               pa2 = -3.72207876035701323847e-01lf, pa3 = 3.18346619901161753674e-01lf,
               pa4 = -1.10894694282396677476e-01lf, pa5 = 3.54783043256182359371e-02lf,
               pa6 = -2.16637559486879084300e-03lf, qa1 = 1.06420880400844228286e-01lf,
               qa2 = 5.40397917702171048937e-01lf, qa3 = 7.18286544141962662868e-02lf,
               qa4 = 1.26171219808761642112e-01lf, qa5 = 1.36370839120290507362e-02lf,
               qa6 = 1.19844998467991074170e-02lf;
  precise double P1 = pa0 + s * pa1;
  precise double s2 = s * s;
  precise double Q1 = 1.0lf + s * qa1;
  precise double s4 = s2 * s2;
  precise double P2 = pa2 + s * pa3;
  precise double s6 = s4 * s2;
  precise double Q2 = qa2 + s * qa3;
  precise double P3 = pa4 + s * pa5;
  precise double Q3 = qa4 + s * qa5;
  precise double p_poly = P1 + s2 * P2 + s4 * P3 + s6 * pa6;
  precise double q_poly = Q1 + s2 * Q2 + s4 * Q3 + s6 * qa6;
  precise double y = p_poly / q_poly;
  return y;
}

// erfc(x) x = exp(-x^2 - 0.5625 + R/S) for 1.25 <= x < 28, R and S polynomials in 1/x^2 with
// fdlibm's coefficients for [1.25, 1/0.35) (`near`) or [1/0.35, 28), evaluated in glibc's order.
// The far interval has one coefficient fewer in each: its zeros here add exact zeros.
const double ERFC_NEAR_R[8] = double[8](
  -9.86494403484714822705e-03lf, -6.93858572707181764372e-01lf, -1.05586262253232909814e+01lf,
  -6.23753324503260060396e+01lf, -1.62396669462573470355e+02lf, -1.84605092906711035994e+02lf,
  -8.12874355063065934246e+01lf, -9.81432934416914548592e+00lf);
const double ERFC_NEAR_S[8] = double[8](
  1.96512716674392571292e+01lf, 1.37657754143519042600e+02lf, 4.34565877475229228821e+02lf,
  6.45387271733267880336e+02lf, 4.29008140027567833386e+02lf, 1.08635005541779435134e+02lf,
  6.57024977031928170135e+00lf, -6.04244152148580987438e-02lf);
const double ERFC_FAR_R[8] = double[8](
  -9.86494292470009928597e-03lf, -7.99283237680523006574e-01lf, -1.77579549177547519889e+01lf,
  -1.60636384855821916062e+02lf, -6.37566443368389627722e+02lf, -1.02509513161107724954e+03lf,
  -4.83519191608651397019e+02lf, 0.0lf);
const double ERFC_FAR_S[8] = double[8](
  3.03380607434824582924e+01lf, 3.25792512996573918826e+02lf, 1.53672958608443695994e+03lf,
  3.19985821950859553908e+03lf, 2.55305040643316442583e+03lf, 4.74528541206955367215e+02lf,
  -2.24409524465858183362e+01lf, 0.0lf);

double erfc_tail(double x, bool near) {
  double ra[8];
  double sa[8];
  if (near) { ra = ERFC_NEAR_R; sa = ERFC_NEAR_S; }
  else { ra = ERFC_FAR_R; sa = ERFC_FAR_S; }
  precise double s = 1.0lf / (x * x);
  precise double R1 = ra[0] + s * ra[1];
  precise double s2 = s * s;
  precise double S1 = 1.0lf + s * sa[0];
  precise double s4 = s2 * s2;
  precise double R2 = ra[2] + s * ra[3];
  precise double s6 = s4 * s2;
  precise double S2 = sa[1] + s * sa[2];
  precise double s8 = s4 * s4;
  precise double R3 = ra[4] + s * ra[5];
  precise double S3 = sa[3] + s * sa[4];
  precise double R4 = ra[6] + s * ra[7];
  precise double S4 = sa[5] + s * sa[6];
  precise double r_poly = R1 + s2 * R2 + s4 * R3 + s6 * R4;
  precise double s_poly = S1 + s2 * S2 + s4 * S3 + s6 * S4 + s8 * sa[7];
  precise double z = clear_low_word(x);
  precise double r = exp64(-z * z - 0.5625lf) * exp64((z - x) * (z + x) + r_poly / s_poly);
  return r;
}

double erf64(double x) {
  uint hx = high_word(x);
  uint ix = hx & 0x7fffffffu;
  bool neg = (hx & 0x80000000u) != 0u;
  if (isnan(x)) return x;
  if (isinf(x)) return neg ? -1.0lf : 1.0lf;
  if (ix < 0x3feb0000u) {  // |x| < 0.84375
    if (ix < 0x3e300000u) {  // |x| < 2^-28
      if (ix < 0x00800000u) {
        precise double r = 0.0625lf * (16.0lf * x + (16.0lf * EFX) * x);
        return r;
      }
      precise double r = x + EFX * x;
      return r;
    }
    precise double r = x + x * erf_small(x, x * x);
    return r;
  }
  if (ix < 0x3ff40000u) {  // |x| < 1.25
    precise double p = erf_near_one(abs(x) - 1.0lf);
    precise double r = neg ? -ERX - p : ERX + p;
    return r;
  }
  if (ix >= 0x40180000u) return neg ? -1.0lf : 1.0lf;  // |x| >= 6
  precise double ax = abs(x);
  precise double r = erfc_tail(ax, ix < 0x4006DB6Eu) / ax;
  precise double res = neg ? r - 1.0lf : 1.0lf - r;
  return res;
}

double erfc64(double x) {
  uint hx = high_word(x);
  uint ix = hx & 0x7fffffffu;
  bool neg = (hx & 0x80000000u) != 0u;
  if (isnan(x)) return x;
  if (isinf(x)) return neg ? 2.0lf : 0.0lf;
  if (ix < 0x3feb0000u) {  // |x| < 0.84375
    if (ix < 0x3c700000u) {  // |x| < 2^-56
      precise double r = 1.0lf - x;
      return r;
    }
    precise double y = erf_small(x, x * x);
    if (neg || hx < 0x3fd00000u) {  // x < 1/4
      precise double r = 1.0lf - (x + x * y);
      return r;
    }
    precise double r = x * y;
    r += (x - 0.5lf);
    precise double res = 0.5lf - r;
    return res;
  }
  if (ix < 0x3ff40000u) {  // |x| < 1.25
    precise double p = erf_near_one(abs(x) - 1.0lf);
    if (!neg) {
      precise double z = 1.0lf - ERX;
      precise double r = z - p;
      return r;
    }
    precise double z = ERX + p;
    precise double r = 1.0lf + z;
    return r;
  }
  if (ix < 0x403c0000u) {  // |x| < 28
    if (neg && ix >= 0x40180000u) return 2.0lf;  // x <= -6
    precise double ax = abs(x);
    precise double r = erfc_tail(ax, ix < 0x4006DB6Du);
    precise double res = neg ? 2.0lf - r / ax : r / ax;
    return res;
  }
  return neg ? 2.0lf : 0.0lf;
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
