#version 450
// Strided copy: out[out_off + idx . out_strides] = in[in_off + idx . in_strides] for every index
// idx of an iteration shape. One kernel serves transpose, broadcast, slice, reverse, concatenate,
// pad and put_slice. T is an unsigned storage type of the element's width (bytes are moved, not
// converted).
// Bindings: 0 in (read), 1 out (write). Push: pc[0] n, pc[1] rank (up to 8), pc[2] in offset,
//           pc[3] out offset, pc[4..12] dims, pc[12..20] in strides, pc[20..28] out strides.
// With DYNAMIC_OFFSET (slice and put_slice with tensor starts): binding 1 holds one int, the
// clamped starts' offset that dynamic_offset.comp computed on the device, added to the input
// offset (specialization constant 0 = 0: slice) or the output offset (1: put_slice); the output
// is binding 2. Same push constants.
#include "common.glsl"
layout(local_size_x_id = 3) in;
layout(set = 0, binding = 0) readonly buffer I { T x[]; };
#ifdef DYNAMIC_OFFSET
layout(constant_id = 0) const uint ON_OUTPUT = 0;
layout(set = 0, binding = 1) readonly buffer D { int dynamic_offset[]; };
layout(set = 0, binding = 2) buffer O { T y[]; };
#else
layout(set = 0, binding = 1) buffer O { T y[]; };
#endif

// On GPUs (specialization constant 1) the index is decoded without divisions: a 32-bit division
// is some 20 instructions there (H200: transpose 8192^2 from 0.85-0.88 to 0.92 of PyTorch; conv's
// rank-6 im2col copies did not move, they are bound by their memory pattern). The workgroup's first threads work out each dim's Granlund-Montgomery multiplier
// once (n / d = (t + ((n - t) >> s1)) >> s2 with t the high word of m n: exact for every 32-bit
// n), and every element then multiplies. CPU devices divide (a barrier costs more there).
layout(constant_id = 1) const bool MAGIC = false;
shared uint magic[8];
shared uint shifts[8];

uint divide(uint n, int d, uint dim, bool magic_ready) {
  if (!magic_ready) return n / dim;
  uint hi, lo;
  umulExtended(magic[d], n, hi, lo);
  uint s = shifts[d];
  return (hi + ((n - hi) >> (s & 0xffu))) >> (s >> 8);
}

void main() {
  uint n = pc[0];
  uint rank = pc[1];
  // One dim needs no quotient (the index is the element's own), so no multipliers either.
  bool magic_ready = MAGIC && rank > 1u;
  if (magic_ready) {
    uint lid = gl_LocalInvocationIndex;
    if (lid < rank) {
      uint d = pc[4 + lid];
      uint l = d <= 1u ? 0u : uint(findMSB(d - 1u)) + 1u;  // ceil(log2 d)
      uint64_t scaled = ((uint64_t(1) << l) - uint64_t(d)) << 32;
      magic[lid] = uint(scaled / uint64_t(d)) + 1u;
      shifts[lid] = min(l, 1u) | ((max(l, 1u) - 1u) << 8);
    }
    barrier();
  }
  uint i = element_index();
  if (i >= n) return;
  int io = int(pc[2]), oo = int(pc[3]);
#ifdef DYNAMIC_OFFSET
  if (ON_OUTPUT == 0) io += dynamic_offset[0]; else oo += dynamic_offset[0];
#endif
  uint rest = i;
  for (int d = int(rank) - 1; d >= 0; --d) {
    uint dim = pc[4 + d];
    uint q = d == 0 ? 0u : divide(rest, d, dim, magic_ready);
    int r = int(rest - q * dim);
    io += r * int(pc[12 + d]);
    oo += r * int(pc[20 + d]);
    rest = q;
  }
  y[oo] = x[io];
}
