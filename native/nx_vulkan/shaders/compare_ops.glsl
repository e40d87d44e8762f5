// The comparisons and logical ops of binary.comp (OUT_U8), by op code: a bool from two values of
// the compute type W. Included by binary_ops.glsl for the compare kernels and by the compiler's
// fused kernels (fuse.rs). Comparisons are exact, so W may be any type that holds both operands.
#ifndef IS_NAN
#ifdef IS_INT
#define IS_NAN(v) false
#else
#define IS_NAN(v) isnan(v)
#endif
#endif
bool compare_apply(uint op, W x, W y) {
  switch (op) {
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
