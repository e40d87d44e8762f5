// The binary ops of binary.comp, by op code (ops/elementwise.rs): c = binary_apply(op, a, b) in
// the compute type W (a bool for comparisons, OUT_U8). Included by binary.comp (op = its
// specialization constant) and by the compiler's fused element-wise kernels (fuse.rs), so a fused
// op computes exactly what its own kernel does. Needs the dtype defines and, for f64 math,
// math64.glsl. The functions that compute are `precise`, as in unary_ops.glsl (why there).
#ifdef IS_INT
// Integer semantics as Nx.BinaryBackend (Elixir integers wrapped to BITS on write): wrap-around
// arithmetic, truncating quotient, remainder with the dividend's sign. Division by zero, which
// raises on the BinaryBackend, gives 0 here.
W int_pow(W x, W y) {
#ifdef IS_SIGNED
  if (y < W(0)) return x == W(1) ? W(1) : (x == W(-1) ? ((y & W(1)) == W(0) ? W(1) : W(-1)) : W(0));
#endif
  W r = W(1);
  for (int i = 0; i < 64 && y != W(0); ++i) {
    if ((y & W(1)) != W(0)) r *= x;
    x *= x;
    y >>= 1;
  }
  return r;
}
W int_quotient(W x, W y) {
  if (y == W(0)) return W(0);
#ifdef IS_SIGNED
  if (y == W(-1)) return W(0) - x;
#endif
  return x / y;
}
W int_remainder(W x, W y) {
  if (y == W(0)) return W(0);
#ifdef IS_SIGNED
  if (y == W(-1)) return W(0);
#endif
  return x - y * (x / y);
}
// Shifts as Elixir's Bitwise on wrapped values: a negative count shifts the other way; counts of
// BITS or more leave 0 (or -1 for a negative value shifted right).
W shift(W x, W y, bool left) {
#ifdef IS_SIGNED
  if (y < W(0)) { y = W(0) - y; left = !left; }
  if (y < W(0) || y >= W(BITS)) {   // y < 0 still: the count was the type's minimum
#else
  if (y >= W(BITS)) {
#endif
#ifdef IS_SIGNED
    return (!left && x < W(0)) ? W(-1) : W(0);
#else
    return W(0);
#endif
  }
  return left ? (x << y) : (x >> y);
}
#define IS_NAN(v) false
#else
#define IS_NAN(v) isnan(v)
#endif

#if !defined(IS_INT) && !defined(PRECISE) && !defined(IS_F64)
// f32 pow without f64 support: GLSL pow is undefined for x < 0 and x == 0, so sign and zero cases
// are handled here. Less accurate than the PRECISE path.
bool odd_integer(W y) { return y == floor(y) && abs(y) < W(16777216.0) && mod(y, W(2)) == W(1); }
precise W pow32(W x, W y) {
  if (y == W(0) || x == W(1)) return W(1);
  if (isnan(x) || isnan(y)) return x + y;
  if (x == W(0)) return y > W(0) ? (odd_integer(y) ? x : W(0)) : ((odd_integer(y) && x < W(0)) ? W(uintBitsToFloat(0xff800000u)) : W(uintBitsToFloat(0x7f800000u)));
  if (x < W(0)) {
    if (y != floor(y)) return W(uintBitsToFloat(0x7fc00000u));
    W r = pow(-x, y);
    return odd_integer(y) ? -r : r;
  }
  return pow(x, y);
}
#endif

#if !defined(IS_INT) && !defined(PRECISE) && !defined(IS_F64)
// fmod of f32 values (f16 widens to them exactly) on the integer significands, as fmod64 in
// math64.glsl: exact on every device, with no floating-point step a compiler could fuse.
// x = mx 2^(ex - 150), y = my 2^(ey - 150); 8 quotient bits per step keep r << s below 2^32.
float fmod32(float x, float y) {
  uint ux = floatBitsToUint(x), uy = floatBitsToUint(y);
  uint sign = ux & 0x80000000u, ax = ux ^ sign, ay = uy & 0x7fffffffu;
  if (ax >= 0x7f800000u || ay > 0x7f800000u || ay == 0u) return uintBitsToFloat(0x7fc00000u);
  if (ax < ay) return x;
  if (ax == ay) return uintBitsToFloat(sign);
  int ex = int(ax >> 23), ey = int(ay >> 23);
  uint mx = (ax & 0x7fffffu) | (ex != 0 ? 0x800000u : 0u), my = (ay & 0x7fffffu) | (ey != 0 ? 0x800000u : 0u);
  ex = max(ex, 1); ey = max(ey, 1);
  uint r = mx % my;
  for (int d = ex - ey; d > 0; ) {
    int s = min(d, 8);
    r = (r << s) % my;
    d -= s;
  }
  if (r == 0u) return uintBitsToFloat(sign);
  int e = ey, shift = min(23 - findMSB(r), e - 1);
  r <<= shift;
  e -= shift;
  uint bits = r >= 0x800000u ? (uint(e) << 23) | (r & 0x7fffffu) : r;
  return uintBitsToFloat(bits | sign);
}
#endif

#ifdef OUT_U8
#include "compare_ops.glsl"
#define binary_apply compare_apply
#else
precise W binary_apply(uint op, W x, W y) {
  switch (op) {
    case 0: return x + y;
    case 1: return x - y;
    case 2: return x * y;
#ifdef IS_INT
    case 4: return max(x, y);
    case 5: return min(x, y);
    case 6: return int_pow(x, y);
    case 7: return int_quotient(x, y);
    case 8: return int_remainder(x, y);
    case 9: return x & y;
    case 10: return x | y;
    case 11: return x ^ y;
    case 12: return shift(x, y, true);
    case 13: return shift(x, y, false);
#else
    case 3: return x / y;
    case 4: return (isnan(x) || isnan(y)) ? x + y : max(x, y);
    case 5: return (isnan(x) || isnan(y)) ? x + y : min(x, y);
#if defined(PRECISE) || defined(IS_F64)
    case 6: return pow64(x, y);
    case 8: return fmod64(x, y);
    case 14: return atan2_64(x, y);
#else
    case 6: return pow32(x, y);
    case 8: return W(fmod32(float(x), float(y)));
    case 14: return atan(x, y);
#endif
#endif
    default: return x;
  }
}
#endif
