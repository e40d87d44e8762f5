// bf16 bits for the GEMM that runs bf16 on the f16 tensor cores (bf16_scale.comp,
// bf16_unscale.comp, gemm_bf16_fixup.comp; ops/matmul.rs bf16_tensor_cores).
#ifndef NXV_BF16_GLSL
#define NXV_BF16_GLSL

// A line's scale when its values cannot all be f16 after one power-of-two scaling.
const int BF16_WIDE = 0x40000000;

// The power of two s that takes a line's largest magnitude (bits hi, the sign cleared) into
// [2^15, 2^16), or BF16_WIDE where the line holds a NaN or an infinity (hi), a subnormal, or a
// nonzero magnitude (lo, the smallest) more than 29 binades below hi, which would not stay a
// normal f16. An all-zero line scales by 1.
int bf16_line_scale(uint hi, uint lo) {
  if (hi >= 0x7f80u) return BF16_WIDE;
  if (hi == 0u) return 0;
  if (lo < 0x80u) return BF16_WIDE;
  int e = int(hi >> 7) - 127;
  if (int(lo >> 7) - 127 < e - 29) return BF16_WIDE;
  return 15 - e;
}

// Line `line`'s scale from its two words in `ctl` (bf16_scale.comp's range pass: the largest
// magnitude, and 0xffff minus the smallest nonzero one).
#define BF16_LINE_SCALE(ctl, line) \
  bf16_line_scale(uint(ctl[1u + 2u * (line)]), 0xffffu - uint(ctl[2u + 2u * (line)]))

// The f16 bits of bf16 value v (bits) times 2^s, for s from bf16_line_scale of v's line: the
// exponent moves (into f16's normal range, 1..30 biased) and the 7-bit significand widens.
uint bf16_to_f16_scaled(uint v, int s) {
  uint m = v & 0x7fffu;
  if (m == 0u) return v & 0x8000u;
  return (v & 0x8000u) | (uint(int(m >> 7) - 112 + s) << 10) | ((m & 0x7fu) << 3);
}

// v times 2^t exactly, by moving v's exponent (ldexp is undefined where the product leaves f32's
// range): infinity past f32's largest, below its normal range the nearest subnormal (or 0 where
// the GPU flushes, as its f32 arithmetic would). Zero and non-finite v come back as they are:
// sums of scaled values are never subnormal.
float scale_exact(float v, int t) {
  uint bits = floatBitsToUint(v);
  int e = int((bits >> 23) & 0xffu);
  if (e == 0 || e == 255) return v;
  int to = e + t;
  if (to >= 255) return uintBitsToFloat((bits & 0x80000000u) | 0x7f800000u);
  if (to >= 1) return uintBitsToFloat((bits & 0x807fffffu) | (uint(to) << 23));
  if (to < -23) return uintBitsToFloat(bits & 0x80000000u);  // below half the smallest subnormal
  return ldexp(uintBitsToFloat((bits & 0x807fffffu) | (1u << 23)), to - 1);
}

// The same, by one multiply where 2^t is a normal f32 (exact unless the product leaves the normal
// range, where IEEE multiplication rounds or overflows as scale_exact does; a GPU may flush).
float bf16_unscale(float v, int t) {
  return abs(t) <= 126 ? v * uintBitsToFloat(uint(t + 127) << 23) : scale_exact(v, t);
}

float bf16_to_float(uint v) { return uintBitsToFloat(v << 16); }

// f32 to bf16 bits as Nx writes it (convert.comp): the top 16 bits, NaN as the positive quiet NaN.
uint float_to_bf16(float v) { return isnan(v) ? 0x7fc0u : floatBitsToUint(v) >> 16; }
#endif
