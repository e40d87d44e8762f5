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
// With STARTS (the same, in one dispatch, for up to 4 starts and rank 4): bindings 1..4 the start
// scalars (unused ones repeat binding 1), 5 the output; every invocation clamps the starts itself
// (dynamic_start.glsl). Push: pc[0..4] as above, pc[4..8] dims, pc[8..12] in strides,
// pc[12..16] out strides, pc[16] the start count | their types << 8 (4 bits each, as
// dynamic_offset.comp's), pc[17..21] each start's max, pc[21..25] the stride each moves by.
#include "common.glsl"
layout(local_size_x_id = 3) in;
layout(set = 0, binding = 0) readonly buffer I { T x[]; };
#if defined(STARTS)
#define MAX_COPY_RANK 4
layout(constant_id = 0) const uint ON_OUTPUT = 0;
layout(set = 0, binding = 1) readonly buffer S0 { uint s0[]; };
layout(set = 0, binding = 2) readonly buffer S1 { uint s1[]; };
layout(set = 0, binding = 3) readonly buffer S2 { uint s2[]; };
layout(set = 0, binding = 4) readonly buffer S3 { uint s3[]; };
layout(set = 0, binding = 5) buffer O { T y[]; };
#include "dynamic_start.glsl"
// The clamped starts' offset (every invocation reads the same few words).
int starts_offset() {
  uint count = pc[16] & 0xffu, types = pc[16] >> 8;
  int off = 0;
  for (uint i = 0u; i < count; ++i) {
    uvec2 words = i == 0u ? uvec2(s0[0], s0[1]) : i == 1u ? uvec2(s1[0], s1[1])
                : i == 2u ? uvec2(s2[0], s2[1]) : uvec2(s3[0], s3[1]);
    off += int(clamped_start(words, (types >> (4u * i)) & 0xfu, pc[17 + i])) * int(pc[21 + i]);
  }
  return off;
}
#elif defined(DYNAMIC_OFFSET)
#define MAX_COPY_RANK 8
layout(constant_id = 0) const uint ON_OUTPUT = 0;
layout(set = 0, binding = 1) readonly buffer D { int dynamic_offset[]; };
layout(set = 0, binding = 2) buffer O { T y[]; };
#else
#define MAX_COPY_RANK 8
layout(set = 0, binding = 1) buffer O { T y[]; };
// Specialization constant 0 (ROWS) = 1: a 2-D grid by rows (CPU devices, ops/layout.rs).
#define ROWS_VARIANT
layout(constant_id = 0) const uint ROWS = 0;
#endif
// Where the dims and the two stride sets start in pc.
#define DIMS_AT 4u
#define IN_STRIDES_AT (4u + MAX_COPY_RANK)
#define OUT_STRIDES_AT (4u + 2u * MAX_COPY_RANK)

// On GPUs (specialization constant 1) the index is decoded without divisions: a 32-bit division
// is some 20 instructions there (H200: transpose 8192^2 from 0.85-0.88 to 0.92 of PyTorch; conv's
// rank-6 im2col copies did not move, they are bound by their memory pattern). The workgroup's first threads work out each dim's Granlund-Montgomery multiplier
// once (n / d = (t + ((n - t) >> s1)) >> s2 with t the high word of m n: exact for every 32-bit
// n), and every element then multiplies. CPU devices divide (a barrier costs more there).
layout(constant_id = 1) const bool MAGIC = false;
shared uint magic[MAX_COPY_RANK];
shared uint shifts[MAX_COPY_RANK];

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
#ifdef ROWS_VARIANT
  if (ROWS != 0u) {
    // By rows: the innermost index is the invocation's x, the row's the workgroup's y and z
    // (65535 rows a z step), decoded over the outer dims (none for rank 2).
    uint inner = rank - 1u;
    uint c = gl_GlobalInvocationID.x;
    uint row = gl_WorkGroupID.y + gl_WorkGroupID.z * 65535u;
    if (c >= pc[DIMS_AT + inner] || row * pc[DIMS_AT + inner] >= n) return;
    int io = int(pc[2]) + int(c) * int(pc[IN_STRIDES_AT + inner]);
    int oo = int(pc[3]) + int(c) * int(pc[OUT_STRIDES_AT + inner]);
    if (rank == 2u) {  // no loop: lavapipe's loops cost as much as the divisions they hold
      y[oo + int(row) * int(pc[OUT_STRIDES_AT])] = x[io + int(row) * int(pc[IN_STRIDES_AT])];
      return;
    }
    for (int d = int(inner) - 1; d >= 0; --d) {
      uint dim = pc[DIMS_AT + d];
      uint q = d == 0 ? 0u : row / dim;
      int r = int(row - q * dim);
      io += r * int(pc[IN_STRIDES_AT + d]);
      oo += r * int(pc[OUT_STRIDES_AT + d]);
      row = q;
    }
    y[oo] = x[io];
    return;
  }
#endif
  // One dim needs no quotient (the index is the element's own), so no multipliers either.
  bool magic_ready = MAGIC && rank > 1u;
  if (magic_ready) {
    uint lid = gl_LocalInvocationIndex;
    if (lid < rank) {
      uint d = pc[DIMS_AT + lid];
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
#if defined(STARTS)
  if (ON_OUTPUT == 0) io += starts_offset(); else oo += starts_offset();
#elif defined(DYNAMIC_OFFSET)
  if (ON_OUTPUT == 0) io += dynamic_offset[0]; else oo += dynamic_offset[0];
#endif
  uint rest = i;
  for (int d = int(rank) - 1; d >= 0; --d) {
    uint dim = pc[DIMS_AT + d];
    uint q = d == 0 ? 0u : divide(rest, d, dim, magic_ready);
    int r = int(rest - q * dim);
    io += r * int(pc[IN_STRIDES_AT + d]);
    oo += r * int(pc[OUT_STRIDES_AT + d]);
    rest = q;
  }
  y[oo] = x[io];
}
