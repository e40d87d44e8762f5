#version 450
// c = op(a, b) elementwise with broadcasting through strides (stride 0 on broadcast axes).
// Defines: T storage type; W compute type (int/uint/int64_t/uint64_t for integers, float/double
// for floats); IS_INT (+ IS_SIGNED, BITS) for integer types; PRECISE (f32 computed in f64);
// OUT_U8 for comparisons and logical ops, which write u8.
// Bindings: 0 a (read), 1 b (read), 2 c (write, contiguous).
// Push: pc[0] n, pc[1] rank, pc[2] a offset, pc[3] b offset, pc[4..10] dims, pc[10..16] a strides,
//       pc[16..22] b strides, pc[22] 1 for the vector path (T4 kernels, rank 1, offsets 0,
//       strides 0 or 1; the grid then covers ceil(n / 4) vectors). Specialization: constant 0 = op code (ops/elementwise.rs).
#include "common.glsl"
#if !defined(IS_INT) && (defined(PRECISE) || defined(IS_F64))
#include "math64.glsl"
#endif
layout(local_size_x = WG) in;
layout(constant_id = 0) const uint OP = 0;
layout(constant_id = 2) const uint PER = 1;
layout(set = 0, binding = 0) readonly buffer A { T a[]; };
layout(set = 0, binding = 1) readonly buffer B { T b[]; };
#ifdef OUT_U8
layout(set = 0, binding = 2) writeonly buffer C { uint8_t c[]; };
#else
layout(set = 0, binding = 2) writeonly buffer C { T c[]; };
#endif
#ifdef T4
layout(set = 0, binding = 0) readonly buffer A4 { T4 a4[]; };
layout(set = 0, binding = 1) readonly buffer B4 { T4 b4[]; };
layout(set = 0, binding = 2) writeonly buffer C4 { T4 c4[]; };
#endif

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
W pow32(W x, W y) {
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
bool apply(W x, W y) {
  switch (OP) {
    case 0: return x == y;
    case 1: return x != y || IS_NAN(x) || IS_NAN(y);
    case 2: return x > y;
    case 3: return x < y;
    case 4: return x >= y;
    case 5: return x <= y;
    case 6: return (x != W(0)) && (y != W(0));          // logical_and (NaN counts as true)
    case 7: return (x != W(0)) || (y != W(0));          // logical_or
    case 8: return (x != W(0)) != (y != W(0));          // logical_xor
    default: return false;
  }
}
#else
W apply(W x, W y) {
  switch (OP) {
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

// A function, not a macro around CANONICAL_NAN: that would evaluate apply() twice.
#ifdef OUT_U8
uint8_t result(bool r) { return uint8_t(r ? 1 : 0); }
#elif defined(IS_INT)
T result(W r) { return T(r); }
#else
T result(W r) { return CANONICAL_NAN(T, r); }
#endif
#define RESULT(x, y) result(apply(W(x), W(y)))

void main() {
  uint n = pc[0];
  uint rank = pc[1];
#if !defined(IS_INT) && (defined(PRECISE) || defined(IS_F64))
  load_math_tables();
#endif
#if defined(T4) && !defined(OUT_U8)
  if (pc[22] == 1u) {  // contiguous (or scalar-broadcast) operands, a vector of 4 at a time
    bool a_vec = pc[10] == 1u, b_vec = pc[16] == 1u;
    FOR_EACH_ELEMENT(j, (n + 3u) / 4u) {
      if (4u * j + 4u <= n) {
        T4 x = a_vec ? a4[j] : T4(a[0]), y = b_vec ? b4[j] : T4(b[0]), r;
        for (int q = 0; q < 4; ++q) r[q] = RESULT(x[q], y[q]);
        c4[j] = r;
      } else {
        for (uint i = 4u * j; i < n; ++i) c[i] = RESULT(a[a_vec ? i : 0u], b[b_vec ? i : 0u]);
      }
    }
    return;
  }
#endif
  FOR_EACH_ELEMENT(i, n) {
    int ao = int(pc[2]), bo = int(pc[3]);
    if (rank == 1u) {  // most operands collapse to one dim: no division to decode the index
      ao += int(i) * int(pc[10]);
      bo += int(i) * int(pc[16]);
    } else {
      uint rest = i;
      for (int d = int(rank) - 1; d >= 0; --d) {
        uint dim = pc[4 + d];
        uint q = rest / dim;
        int r = int(rest - q * dim);
        ao += r * int(pc[10 + d]);
        bo += r * int(pc[16 + d]);
        rest = q;
      }
    }
    c[i] = RESULT(a[ao], b[bo]);
  }
}
