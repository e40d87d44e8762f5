// Shared by the reduction kernels and fuse.rs's generated ones: identity and combine for OP (0 sum, 1 product,
// 2 max, 3 min) over the accumulator type ACC; NaN propagates through max and min. combine is
// `precise`: a fused prologue's multiply is never contracted into the fold's add (unary_ops.glsl).
#ifdef IS_INT
// The storage type's own extremes (T_MIN, T_MAX defines): 8/16-bit values are computed in 32 bits.
ACC lowest() { return ACC(T_MIN); }
ACC highest() { return ACC(T_MAX); }
#define IS_NAN(v) false
#else
ACC lowest() { return ACC(uintBitsToFloat(0xff800000u)); }
ACC highest() { return ACC(uintBitsToFloat(0x7f800000u)); }
#define IS_NAN(v) isnan(v)
#endif

// A reduction's result as stored: a NaN as the positive quiet NaN (common.glsl's CANONICAL_NAN),
// as the element-wise kernels store theirs, whatever NaN the device's conversion makes (the H200
// turns a NaN double into 0x7FFFFFFF where lavapipe keeps 0x7FC00000).
#ifdef IS_INT
#define REDUCED(v) T(v)
#else
#define REDUCED(v) CANONICAL_NAN(T, v)
#endif

// By op code, for generated kernels that fold with several ops (fuse.rs); identity() and
// combine() are OP's.
ACC identity_of(uint op) {
  switch (op) {
    case 0: return ACC(0);
    case 1: return ACC(1);
    case 2: return lowest();
    default: return highest();
  }
}

precise ACC combine_of(uint op, ACC u, ACC v) {
  switch (op) {
    case 0: return u + v;
    case 1: return u * v;
    case 2: return (IS_NAN(u) || IS_NAN(v)) ? u + v : max(u, v);
    default: return (IS_NAN(u) || IS_NAN(v)) ? u + v : min(u, v);
  }
}

ACC identity() { return identity_of(OP); }
precise ACC combine(ACC u, ACC v) { return combine_of(OP, u, v); }
