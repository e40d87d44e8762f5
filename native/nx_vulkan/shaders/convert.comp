#version 450
// y[i] = as_type(x[i]) between any two of f32 f64 f16 bf16 s8 s16 s32 s64 u8 u16 u32 u64 c64 c128
// (complex to real keeps the real part; real to complex sets a zero imaginary part), with
// Nx.BinaryBackend's rules: float->float and int->float round to nearest; int->int wraps;
// float->int truncates toward zero then wraps, NaN -> 0, +Inf -> the type's max, -Inf -> its min;
// bf16 is f32 rounded to nearest, then truncated to its top 16 bits (as Nx writes it).
// One module for every pair: the input and output types are specialization constants, and each
// binding is declared once per element width (aliases of the same buffer).
// Bindings: 0 x (read), 1 y (write). Push: pc[0] n. Pairs of real types of at most 4 bytes run
// four elements per step through 4 to 16-byte loads and stores; f32 <-> f16 / bf16 go on the
// bits, in integer arithmetic, so no device's conversion rounding or denormal mode decides them.
// Specialization: constant 0 = in_code * 16 + out_code, codes as ops/convert.rs TYPE_CODES.
#include "common.glsl"
layout(local_size_x_id = 3) in;
layout(constant_id = 0) const uint OP = 0;
layout(constant_id = 2) const uint PER = 1;
const uint IN = OP / 16;
const uint OUT = OP % 16;
layout(set = 0, binding = 0) restrict readonly buffer X1 { uint8_t x1[]; };
layout(set = 0, binding = 0) restrict readonly buffer X2 { uint16_t x2[]; };
layout(set = 0, binding = 0) restrict readonly buffer X4 { uint x4[]; };
layout(set = 0, binding = 0) restrict readonly buffer X8 { uint64_t x8[]; };
layout(set = 0, binding = 1) restrict writeonly buffer Y1 { uint8_t y1[]; };
layout(set = 0, binding = 1) restrict writeonly buffer Y2 { uint16_t y2[]; };
layout(set = 0, binding = 1) restrict writeonly buffer Y4 { uint y4[]; };
layout(set = 0, binding = 1) restrict writeonly buffer Y8 { uint64_t y8[]; };
// The vector path's views: four elements of a 1, 2 or 4-byte type in 4, 8 or 16 bytes.
layout(set = 0, binding = 0) restrict readonly buffer XV1 { uint xv1[]; };
layout(set = 0, binding = 0) restrict readonly buffer XV2 { uvec2 xv2[]; };
layout(set = 0, binding = 0) restrict readonly buffer XV4 { uvec4 xv4[]; };
layout(set = 0, binding = 1) restrict writeonly buffer YV1 { uint yv1[]; };
layout(set = 0, binding = 1) restrict writeonly buffer YV2 { uvec2 yv2[]; };
layout(set = 0, binding = 1) restrict writeonly buffer YV4 { uvec4 yv4[]; };

bool is_float(uint code) { return code <= 3u; }
bool is_complex(uint code) { return code >= 12u; }
uint int_bits(uint code) { return 8u << ((code - 4u) % 4u); }
bool is_signed(uint code) { return code >= 4u && code <= 7u; }
uint type_bytes(uint code) {
  if (is_complex(code)) return code == 12u ? 8u : 16u;
  if (is_float(code)) return code == 0u ? 4u : (code == 1u ? 8u : 2u);
  return int_bits(code) / 8u;
}
// Pairs of real types of at most 4 bytes each take the vector path (main; ops/convert.rs
// dispatches by the same rule). A function of the specialization constants: the driver folds it.
bool narrow() { return !is_complex(IN) && !is_complex(OUT) && type_bytes(IN) <= 4u && type_bytes(OUT) <= 4u; }
// Of those, 4-byte to 2-byte pairs (f32 -> f16/bf16, s32 -> s16, ...) take eight elements a
// step, so that their stores are 16 bytes wide too (four a step stored 8: f32 -> f16 ran at 0.70
// of PyTorch's speed on the H200).
bool halving() { return narrow() && type_bytes(IN) == 4u && type_bytes(OUT) == 2u; }

double f32_bits_to_double(uint f);
uint double_to_f32_bits(double v);

// Complex c64 (code 12) and c128 (code 13) as (re, im) pairs of f32 / f64.
dvec2 load_complex(uint i) {
  if (IN == 12u) return dvec2(f32_bits_to_double(x4[2 * i]), f32_bits_to_double(x4[2 * i + 1]));
  return dvec2(uint64BitsToDouble(x8[2 * i]), uint64BitsToDouble(x8[2 * i + 1]));
}

void store_complex(uint i, dvec2 v) {
  if (OUT == 12u) {
    y4[2 * i] = double_to_f32_bits(v.x);
    y4[2 * i + 1] = double_to_f32_bits(v.y);
  } else {
    y8[2 * i] = doubleBitsToUint64(v.x);
    y8[2 * i + 1] = doubleBitsToUint64(v.y);
  }
}

// ---- Real elements as their bit patterns (zero-extended to 64 bits) ----------------------------
uint64_t load_bits(uint i) {
  switch (type_bytes(IN)) {
    case 1: return uint64_t(x1[i]);
    case 2: return uint64_t(x2[i]);
    case 4: return uint64_t(x4[i]);
    default: return x8[i];
  }
}

void store_bits(uint i, uint64_t b) {
  switch (type_bytes(OUT)) {
    case 1: y1[i] = uint8_t(b); break;
    case 2: y2[i] = uint16_t(b); break;
    case 4: y4[i] = uint(b); break;
    default: y8[i] = b; break;
  }
}

// f16 bits to f32 bits, exactly, in integer arithmetic (f16 subnormals are f32 normals).
uint f16_to_f32(uint h) {
  uint sign = (h & 0x8000u) << 16;
  uint e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 31u) return sign | 0x7f800000u | (m << 13);
  if (e != 0u) return sign | ((e + 112u) << 23) | (m << 13);
  if (m == 0u) return sign;
  int top = findMSB(m);  // m 2^-24 = 2^(top - 24) (1 + ...)
  return sign | (uint(top + 103) << 23) | ((m << uint(23 - top)) & 0x7fffffu);
}

// f32 bits to the double of the same value, in integer arithmetic: a GPU's f32 -> f64
// conversion may flush f32 subnormals (bf16's too) to zero (the H200 does).
double f32_bits_to_double(uint f) {
  uint64_t sign = uint64_t(f >> 31) << 63;
  uint e = (f >> 23) & 0xffu, m = f & 0x7fffffu;
  if (e == 255u) return uint64BitsToDouble(sign | 0x7ff0000000000000UL | (uint64_t(m) << 29));
  if (e != 0u) return uint64BitsToDouble(sign | (uint64_t(e + 896u) << 52) | (uint64_t(m) << 29));
  if (m == 0u) return uint64BitsToDouble(sign);
  int top = findMSB(m);  // m 2^-149 = 2^(top - 149) (1 + ...)
  uint64_t mantissa = (uint64_t(m) << uint(52 - top)) & 0xfffffffffffffUL;
  return uint64BitsToDouble(sign | (uint64_t(top + 874) << 52) | mantissa);
}

// A double's nearest f32 (ties to even) as bits; below f32's smallest normal, where a GPU's
// conversion may flush, v 2^149 rounded to an integer in integer arithmetic on the double's
// bits: lavapipe on one AMD EPYC host rounded roundEven(ldexp(v, 149)) of a tie the wrong way.
uint double_to_f32_bits(double v) {
  if (abs(v) >= 1.1754943508222875e-38lf || v == 0.0lf || isnan(v)) return floatBitsToUint(float(v));
  uint64_t bits = doubleBitsToUint64(v);
  uint sign = uint(bits >> 63) << 31;
  uint e = uint(bits >> 52) & 0x7ffu;  // below 897 here: |v| < 2^-126
  // |v| = m 2^(e - 1075) = m 2^-s in units of 2^-149 (f64 subnormals: e = 0, far below a unit).
  uint64_t m = (bits & 0xfffffffffffffUL) | (e != 0u ? (1UL << 52) : 0UL);
  uint s = 926u - max(e, 1u);  // 30 or more
  if (s >= 64u) return sign;
  uint64_t q = m >> s, rest = m - (q << s), tie = 1UL << (s - 1u);
  if (rest > tie || (rest == tie && (q & 1UL) != 0UL)) q += 1UL;
  return sign | uint(q);  // 2^23 units is the smallest normal's bits
}

double float_value(uint64_t b) {
  switch (IN) {
    case 0: return f32_bits_to_double(uint(b));
    case 1: return uint64BitsToDouble(b);
    case 2: return double(uintBitsToFloat(f16_to_f32(uint(b))));
    default: return f32_bits_to_double(uint(b) << 16);
  }
}

// Integers travel as their 64-bit two's-complement pattern (sign-extended when signed).
int64_t int_value(uint64_t b) {
  switch (IN) {
    case 4: return int64_t(int8_t(b));
    case 5: return int64_t(int16_t(b));
    case 6: return int64_t(int(uint(b)));
    default: return int64_t(b);
  }
}

// f32 bits to f16 bits, rounded to nearest even in integer arithmetic (so no device's own
// conversion rounding decides it), NaN to the positive quiet NaN.
uint f32_to_f16(uint f) {
  uint sign = (f >> 16) & 0x8000u;
  uint a = f & 0x7fffffffu;
  if (a > 0x7f800000u) return 0x7e00u;
  if (a >= 0x477ff000u) return sign | 0x7c00u;  // from 65520 (the tie above 65504) up: Inf
  uint q, rest, tie;
  if (a >= 0x38800000u) {  // normal in f16: rebias the exponent, drop 13 mantissa bits
    a -= 0x38000000u;
    q = a >> 13;
    rest = a & 0x1fffu;
    tie = 0x1000u;
  } else {
    if (a < 0x33000000u) return sign;  // below 2^-25: zero (2^-25 itself ties to even, 0)
    uint shift = 126u - (a >> 23);     // 14..24: units of 2^-24, the f16 subnormal step
    uint m = (a & 0x7fffffu) | 0x800000u;
    q = m >> shift;
    rest = m & ((1u << shift) - 1u);
    tie = 1u << (shift - 1u);
  }
  if (rest > tie || (rest == tie && (q & 1u) == 1u)) q += 1u;  // a carry into the exponent is right
  return sign | q;
}

// A double (of magnitude above 2^-25) rounded to f32 with round-to-odd (truncated, the last bit
// set when inexact): rounding that on to f16's 11 bits gives the double's own nearest f16, with
// no double rounding.
uint f32_round_to_odd(double v) {
  float t = float(v);
  uint bits = floatBitsToUint(t);
  if (double(t) != v && !isinf(v)) {
    if (abs(double(t)) > abs(v)) bits -= 1u;  // rounded away from zero: step back (same sign)
    bits |= 1u;
  }
  return bits;
}

// NaN narrows to the positive quiet NaN, as Nx writes :nan (a GPU's or CPU's own NaN, from
// Inf - Inf say, may carry the sign bit). bf16 is f32 rounded, then truncated (as Nx writes it).
uint64_t float_bits(double v) {
  bool nan = isnan(v);
  switch (OUT) {
    case 0: return nan ? 0x7fc00000UL : uint64_t(double_to_f32_bits(v));
    case 1: return nan ? 0x7ff8000000000000UL : doubleBitsToUint64(v);
    case 2:
      if (nan) return 0x7e00UL;
      if (abs(v) <= 2.98023223876953125e-08lf) return uint64_t((unpackDouble2x32(v).y >> 16) & 0x8000u);
      return uint64_t(f32_to_f16(f32_round_to_odd(v)));
    default: return nan ? 0x7fc0UL : uint64_t(double_to_f32_bits(v) >> 16);
  }
}

// trunc(v) mod 2^64 as a two's-complement pattern, exact for every finite double.
int64_t wrap_trunc(double v) {
  double t = trunc(v);
  if (abs(t) < 9223372036854775808.0lf) return int64_t(t);
  int e;
  double f = frexp(abs(t), e);            // |t| = f * 2^e, e >= 64
  uint64_t m = uint64_t(ldexp(f, 53));    // 53-bit integer mantissa
  int shift = e - 53;
  uint64_t bits = shift >= 64 ? 0ul : (m << uint(shift));
  return t < 0.0lf ? -int64_t(bits) : int64_t(bits);
}

int64_t int_max(uint code) {
  uint b = int_bits(code);
  if (is_signed(code)) return b == 64u ? 9223372036854775807l : (int64_t(1) << (b - 1u)) - 1l;
  return b == 64u ? -1l : (int64_t(1) << b) - 1l;   // u64 max as its bit pattern
}

int64_t int_min(uint code) {
  uint b = int_bits(code);
  return is_signed(code) ? -(int64_t(1) << (b - 1u)) : 0l;
}

// The float rules into an integer type (truncation to the output width is the wrap-around,
// done by store_bits / the vector stores).
uint64_t int_bits_of(double v) {
  if (isnan(v)) return 0UL;
  if (isinf(v)) return uint64_t(v > 0.0lf ? int_max(OUT) : int_min(OUT));
  return uint64_t(wrap_trunc(v));
}

// One real element to another, bits to bits.
uint64_t convert_bits(uint64_t b) {
  // The common float pairs straight on the bits.
  if (IN == 0u && OUT == 2u) return uint64_t(f32_to_f16(uint(b)));
  if (IN == 2u && OUT == 0u) {
    uint f = f16_to_f32(uint(b));
    return uint64_t((f & 0x7fffffffu) > 0x7f800000u ? 0x7fc00000u : f);
  }
  if (IN == 0u && OUT == 3u) return uint64_t((uint(b) & 0x7fffffffu) > 0x7f800000u ? 0x7fc0u : uint(b) >> 16);
  if (IN == 3u && OUT == 0u) return uint64_t((uint(b) & 0x7fffu) > 0x7f80u ? 0x7fc00000u : uint(b) << 16);
  if (is_float(IN)) {
    double v = float_value(b);
    return is_float(OUT) ? float_bits(v) : int_bits_of(v);
  }
  int64_t v = int_value(b);
  if (!is_float(OUT)) return uint64_t(v);
  // Straight to f32 (no double rounding through f64 for 64-bit integers).
  if (OUT == 0u) return uint64_t(floatBitsToUint(IN == 11u ? float(uint64_t(v)) : float(v)));
  return float_bits(IN == 11u ? double(uint64_t(v)) : double(v));
}

void convert(uint i) {
  if (is_complex(OUT)) {
    // Into complex: complex pairs convert, reals become (x, 0).
    dvec2 v;
    if (is_complex(IN)) v = load_complex(i);
    else if (is_float(IN)) v = dvec2(float_value(load_bits(i)), 0.0lf);
    else if (IN == 11u) v = dvec2(double(uint64_t(int_value(load_bits(i)))), 0.0lf);
    else v = dvec2(double(int_value(load_bits(i))), 0.0lf);
    store_complex(i, v);
  } else if (is_complex(IN)) {
    // Out of complex: the real part, then the float rules (as the BinaryBackend).
    double v = load_complex(i).x;
    store_bits(i, is_float(OUT) ? float_bits(v) : int_bits_of(v));
  } else {
    store_bits(i, convert_bits(load_bits(i)));
  }
}

// ---- Four narrow elements at a time --------------------------------------------------------------
// Element 4j + q of a 4-byte type is component q of the j-th uvec4; of a 2-byte type, half q % 2
// of word q / 2 of the j-th uvec2; of a 1-byte type, byte q of the j-th word (little-endian).
uvec4 load4(uint j) {
  switch (type_bytes(IN)) {
    case 4: return xv4[j];
    case 2: {
      uvec2 w = xv2[j];
      return uvec4(w.x & 0xffffu, w.x >> 16, w.y & 0xffffu, w.y >> 16);
    }
    default: {
      uint w = xv1[j];
      return uvec4(w & 0xffu, (w >> 8) & 0xffu, (w >> 16) & 0xffu, w >> 24);
    }
  }
}

void store4(uint j, uvec4 v) {
  switch (type_bytes(OUT)) {
    case 4: yv4[j] = v; break;
    case 2: yv2[j] = uvec2((v.x & 0xffffu) | (v.y << 16), (v.z & 0xffffu) | (v.w << 16)); break;
    default: yv1[j] = (v.x & 0xffu) | ((v.y & 0xffu) << 8) | ((v.z & 0xffu) << 16) | (v.w << 24); break;
  }
}

uint convert_word(uint b) { return uint(convert_bits(uint64_t(b))); }
// Two converted elements as the halves of one word (the first in the low half).
uint pack2(uint first, uint second) { return (convert_word(first) & 0xffffu) | (convert_word(second) << 16); }

void main() {
  uint n = pc[0];
  if (halving()) {
    // The host dispatches ceil(n / 8) groups for these pairs (ops/convert.rs).
    FOR_EACH_ELEMENT(j, (n + 7u) / 8u) {
      if (8u * j + 8u <= n) {
        uvec4 lo = xv4[2u * j], hi = xv4[2u * j + 1u];
        yv4[j] = uvec4(pack2(lo.x, lo.y), pack2(lo.z, lo.w), pack2(hi.x, hi.y), pack2(hi.z, hi.w));
      } else {
        for (uint i = 8u * j; i < n; ++i) convert(i);
      }
    }
  } else if (narrow()) {
    // The host dispatches ceil(n / 4) groups for these pairs (ops/convert.rs).
    FOR_EACH_ELEMENT(j, (n + 3u) / 4u) {
      if (4u * j + 4u <= n) {
        uvec4 v = load4(j);
        store4(j, uvec4(convert_word(v.x), convert_word(v.y), convert_word(v.z), convert_word(v.w)));
      } else {
        for (uint i = 4u * j; i < n; ++i) convert(i);
      }
    }
  } else {
    FOR_EACH_ELEMENT(i, n) convert(i);
  }
}
