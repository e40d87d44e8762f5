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
layout(local_size_x = WG) in;
layout(set = 0, binding = 0) readonly buffer I { T x[]; };
#ifdef DYNAMIC_OFFSET
layout(constant_id = 0) const uint ON_OUTPUT = 0;
layout(set = 0, binding = 1) readonly buffer D { int dynamic_offset[]; };
layout(set = 0, binding = 2) buffer O { T y[]; };
#else
layout(set = 0, binding = 1) buffer O { T y[]; };
#endif

// Each invocation copies PER consecutive elements (specialization constant 2, as the element-wise
// kernels: 4 on GPUs, 1 on CPU devices). The first one's index is decoded by divisions, one per
// dim (the costly part: a 32-bit division is some 20 instructions on a GPU); the next ones step
// along the innermost dim and decode again only when it wraps.
layout(constant_id = 2) const uint PER = 1;

void decode(uint i, uint rank, inout int io, inout int oo, out uint inner) {
  uint rest = i;
  inner = 0u;
  for (int d = int(rank) - 1; d >= 0; --d) {
    uint dim = pc[4 + d];
    uint q = rest / dim;
    uint r = rest - q * dim;
    if (d == int(rank) - 1) inner = r;
    io += int(r) * int(pc[12 + d]);
    oo += int(r) * int(pc[20 + d]);
    rest = q;
  }
}

void main() {
  uint n = pc[0];
  uint rank = pc[1];
  uint first = element_index() * PER;
  if (first >= n) return;
  int base_in = int(pc[2]), base_out = int(pc[3]);
#ifdef DYNAMIC_OFFSET
  if (ON_OUTPUT == 0) base_in += dynamic_offset[0]; else base_out += dynamic_offset[0];
#endif
  uint last_dim = pc[4 + rank - 1u];
  int in_step = int(pc[12 + rank - 1u]), out_step = int(pc[20 + rank - 1u]);
  int io = base_in, oo = base_out;
  uint inner;
  decode(first, rank, io, oo, inner);
  uint count = min(PER, n - first);
  for (uint k = 0u; k < count; ++k) {
    if (k > 0u) {
      if (++inner == last_dim) {
        io = base_in;
        oo = base_out;
        decode(first + k, rank, io, oo, inner);
      } else {
        io += in_step;
        oo += out_step;
      }
    }
    y[oo] = x[io];
  }
}
