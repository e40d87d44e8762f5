#version 450
// y[i] = as_type(x[i]) between any two of f32 f64 f16 bf16 s8 s16 s32 s64 u8 u16 u32 u64 c64 c128
// (complex to real keeps the real part; real to complex sets a zero imaginary part), with
// Nx.BinaryBackend's rules: float->float and int->float round to nearest; int->int wraps;
// float->int truncates toward zero then wraps, NaN -> 0, +Inf -> the type's max, -Inf -> its min;
// bf16 is f32 rounded to nearest, then truncated to its top 16 bits (as Nx writes it).
// One module for every pair: the input and output types are specialization constants, and each
// binding is declared once per element width (aliases of the same buffer).
// Bindings: 0 x (read), 1 y (write). Push: pc[0] n.
// Specialization: constant 0 = in_code * 16 + out_code, codes as ops/convert.rs TYPE_CODES.
#include "common.glsl"
layout(local_size_x = WG) in;
layout(constant_id = 0) const uint OP = 0;
layout(constant_id = 2) const uint PER = 1;
const uint IN = OP / 16;
const uint OUT = OP % 16;
layout(set = 0, binding = 0) readonly buffer X1 { uint8_t x1[]; };
layout(set = 0, binding = 0) readonly buffer X2 { uint16_t x2[]; };
layout(set = 0, binding = 0) readonly buffer X4 { uint x4[]; };
layout(set = 0, binding = 0) readonly buffer X8 { uint64_t x8[]; };
layout(set = 0, binding = 1) writeonly buffer Y1 { uint8_t y1[]; };
layout(set = 0, binding = 1) writeonly buffer Y2 { uint16_t y2[]; };
layout(set = 0, binding = 1) writeonly buffer Y4 { uint y4[]; };
layout(set = 0, binding = 1) writeonly buffer Y8 { uint64_t y8[]; };

bool is_float(uint code) { return code <= 3u; }
bool is_complex(uint code) { return code >= 12u; }

// Complex c64 (code 12) and c128 (code 13) as (re, im) pairs of f32 / f64.
dvec2 load_complex(uint i) {
  if (IN == 12u) return dvec2(uintBitsToFloat(x4[2 * i]), uintBitsToFloat(x4[2 * i + 1]));
  return dvec2(uint64BitsToDouble(x8[2 * i]), uint64BitsToDouble(x8[2 * i + 1]));
}

void store_complex(uint i, dvec2 v) {
  if (OUT == 12u) {
    y4[2 * i] = floatBitsToUint(float(v.x));
    y4[2 * i + 1] = floatBitsToUint(float(v.y));
  } else {
    y8[2 * i] = doubleBitsToUint64(v.x);
    y8[2 * i + 1] = doubleBitsToUint64(v.y);
  }
}
uint int_bits(uint code) { return 8u << ((code - 4u) % 4u); }
bool is_signed(uint code) { return code >= 4u && code <= 7u; }

double load_float(uint i) {
  switch (IN) {
    case 0: return double(uintBitsToFloat(x4[i]));
    case 1: return uint64BitsToDouble(x8[i]);
    case 2: return double(unpackHalf2x16(uint(x2[i])).x);
    default: return double(uintBitsToFloat(uint(x2[i]) << 16));
  }
}

// Integers travel as their 64-bit two's-complement pattern (sign-extended when signed).
int64_t load_int(uint i) {
  switch (IN) {
    case 4: return int64_t(int8_t(x1[i]));
    case 5: return int64_t(int16_t(x2[i]));
    case 6: return int64_t(int(x4[i]));
    case 7: return int64_t(x8[i]);
    case 8: return int64_t(x1[i]);
    case 9: return int64_t(x2[i]);
    case 10: return int64_t(x4[i]);
    default: return int64_t(x8[i]);
  }
}

void store_float(uint i, double v) {
  switch (OUT) {
    case 0: y4[i] = isnan(v) ? 0x7fc00000u : floatBitsToUint(float(v)); break;
    case 1: y8[i] = isnan(v) ? 0x7ff8000000000000UL : doubleBitsToUint64(v); break;
    // NaN narrows to the positive quiet NaN, as Nx writes :nan (a GPU's or CPU's own NaN,
    // from Inf - Inf say, may carry the sign bit).
    case 2: y2[i] = isnan(v) ? uint16_t(0x7e00u) : uint16_t(packHalf2x16(vec2(float(v), 0.0)) & 0xffffu); break;
    default: y2[i] = isnan(v) ? uint16_t(0x7fc0u) : uint16_t(floatBitsToUint(float(v)) >> 16); break;
  }
}

// Truncation to the output width is the wrap-around.
void store_int(uint i, int64_t v) {
  switch (int_bits(OUT)) {
    case 8: y1[i] = uint8_t(v); break;
    case 16: y2[i] = uint16_t(v); break;
    case 32: y4[i] = uint(v); break;
    default: y8[i] = uint64_t(v); break;
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

void convert(uint i) {
  if (is_complex(OUT)) {
    // Into complex: complex pairs convert, reals become (x, 0).
    dvec2 v;
    if (is_complex(IN)) v = load_complex(i);
    else if (is_float(IN)) v = dvec2(load_float(i), 0.0lf);
    else if (IN == 11u) v = dvec2(double(uint64_t(load_int(i))), 0.0lf);
    else v = dvec2(double(load_int(i)), 0.0lf);
    store_complex(i, v);
  } else if (is_float(IN) || is_complex(IN)) {
    // Out of complex: the real part, then the float rules (as the BinaryBackend).
    double v = is_complex(IN) ? load_complex(i).x : load_float(i);
    if (is_float(OUT)) store_float(i, v);
    else if (isnan(v)) store_int(i, 0l);
    else if (isinf(v)) store_int(i, v > 0.0lf ? int_max(OUT) : int_min(OUT));
    else store_int(i, wrap_trunc(v));
  } else {
    int64_t v = load_int(i);
    if (!is_float(OUT)) store_int(i, v);
    // Straight to f32 (no double rounding through f64 for 64-bit integers).
    else if (OUT == 0u) y4[i] = floatBitsToUint(IN == 11u ? float(uint64_t(v)) : float(v));
    else if (IN == 11u) store_float(i, double(uint64_t(v)));
    else store_float(i, double(v));
  }
}

void main() {
  uint n = pc[0];
  FOR_EACH_ELEMENT(i, n) convert(i);
}
