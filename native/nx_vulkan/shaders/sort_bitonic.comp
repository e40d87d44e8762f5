#version 450
// sort / argsort of long rows by a bitonic network over (key, index) pairs, padded to a power of
// two P per row: log2(P) (log2(P) + 1) / 2 compare-exchange passes, one dispatch each, instead of
// sort.comp's O(len^2) ranks. Keys are the values mapped to u64 so that unsigned order is Nx's
// order (NaN largest, -0.0 equal to 0.0; bit-inverted for :desc), ties broken by the original
// index, so the result is sort.comp's: stable, in both directions. Pad pairs sort last.
// Defines: T element, W compute type, IS_INT (+ IS_SIGNED) as sort.comp.
// Specialization: constant 0 = (stage & 3) | desc << 2 | argsort << 3 | (index bytes == 8) << 4 |
// (stage & 4) << 3; stage 0 load (bindings 0 x read, 1 pairs write), 1 pass (binding 0 pairs,
// read and written), 2 store (0 x read, 1 pairs read, 2 out write: values as T, or u32/u64
// indices), 3 local passes (binding 0 pairs, read and written; GPUs only, ops/reduce.rs), 4 two
// passes at once (as 1).
// Push: pc[0] n (rows * len), pc[1] len, pc[2] axis stride, pc[3] kept rank, pc[4..10] kept dims,
//       pc[10..16] kept strides, pc[16] P, pc[17] pass distance j, pc[18] block size k (local
//       passes: every block size from pc[17] to pc[18]).
// Dispatch: one invocation per pair slot (load), per compared pair (pass), per four pairs (two
// passes), per element (store); one workgroup per LOCAL_PAIRS pairs (local passes).
#include "common.glsl"
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
layout(local_size_x_id = 3) in;
layout(constant_id = 0) const uint OP = 0;
const uint STAGE = (OP & 3u) | ((OP >> 3u) & 4u);
const bool DESC = (OP & 4u) != 0u;
const bool ARGSORT = (OP & 8u) != 0u;
const bool WIDE_INDEX = (OP & 16u) != 0u;

struct Pair { uint64_t key; uint64_t index; };
layout(set = 0, binding = 0) buffer B0 { T x[]; };
layout(set = 0, binding = 0) buffer P0 { Pair pairs_in_place[]; };
layout(set = 0, binding = 1) buffer P1 { Pair pairs[]; };
layout(set = 0, binding = 2) writeonly buffer YT { T yt[]; };
layout(set = 0, binding = 2) writeonly buffer Y4 { uint y4[]; };
layout(set = 0, binding = 2) writeonly buffer Y8 { uint64_t y8[]; };

uint64_t order_key(W v) {
#ifdef IS_INT
#ifdef IS_SIGNED
  return uint64_t(int64_t(v)) ^ 0x8000000000000000UL;
#else
  return uint64_t(v);
#endif
#else
  double d = double(v);
  if (isnan(d)) return 0xFFF8000000000000UL;     // above +Inf's key: NaN sorts largest
  if (d == 0.0lf) d = 0.0lf;                      // -0.0 ties with 0.0, as in the BinaryBackend
  uint64_t bits = doubleBitsToUint64(d);
  return (bits >> 63) != 0UL ? ~bits : bits | 0x8000000000000000UL;
#endif
}

bool before(Pair a, Pair b) { return a.key < b.key || (a.key == b.key && a.index < b.index); }

// Local passes: a workgroup loads LOCAL_PAIRS consecutive pairs (16 KiB, the shared memory every
// Vulkan device has) and runs in shared memory every pass whose distance is below that, for each
// block size asked, with a barrier between passes: one dispatch where the global network takes
// one per pass (a 1 M row, with stage 4's paired global passes: 43 dispatches in all instead of
// 212). A row's P is a multiple of LOCAL_PAIRS when this stage runs, so no compared pair crosses
// a tile, and each pass compares and swaps exactly the pairs the global pass of the same
// distance would.
const uint LOCAL_PAIRS = 1024u;
shared Pair tile[LOCAL_PAIRS];

uint row_base(uint row) { return strided(row, pc[3], 4, 10, 0); }

void main() {
  uint len = pc[1], stride = pc[2], P = pc[16];
  uint e = element_index();
  if (STAGE == 0u) {
    if (e >= (pc[0] / len) * P) return;
    uint row = e / P, i = e - row * P;
    Pair p;
    if (i < len) {
      uint64_t key = order_key(W(x[row_base(row) + i * stride]));
      p = Pair(DESC ? ~key : key, uint64_t(i));
    } else {
      p = Pair(~0UL, uint64_t(P) + uint64_t(i));   // pads after every element
    }
    pairs[e] = p;
  } else if (STAGE == 1u) {
    uint j = pc[17], k = pc[18], half_p = P / 2u;
    if (e >= (pc[0] / len) * half_p) return;
    uint row = e / half_p, s = e - row * half_p;
    uint i = (s / j) * 2u * j + (s % j);
    uint at = row * P + i;
    Pair a = pairs_in_place[at], b = pairs_in_place[at + j];
    bool ascending = (i & k) == 0u;
    if (ascending ? before(b, a) : before(a, b)) {
      pairs_in_place[at] = b;
      pairs_in_place[at + j] = a;
    }
  } else if (STAGE == 4u) {
    // Two passes at once, distances j and j / 2 of one block: each invocation holds the four
    // pairs a, a + h, a + 2h, a + 3h (h = j / 2; a has bits h and 2h clear), compares them as
    // the pass of distance j would and then as the pass of distance h would: half the global
    // passes' reads and writes. The block's direction is the same for all four (k > j).
    uint h = pc[17] / 2u, k = pc[18], quarter_p = P / 4u;
    if (e >= (pc[0] / len) * quarter_p) return;
    uint row = e / quarter_p, s = e - row * quarter_p;
    uint i = (s / h) * 4u * h + (s % h);
    uint at = row * P + i;
    Pair p0 = pairs_in_place[at], p1 = pairs_in_place[at + h];
    Pair p2 = pairs_in_place[at + 2u * h], p3 = pairs_in_place[at + 3u * h];
    bool ascending = (i & k) == 0u;
    Pair t;
    if (ascending ? before(p2, p0) : before(p0, p2)) { t = p0; p0 = p2; p2 = t; }
    if (ascending ? before(p3, p1) : before(p1, p3)) { t = p1; p1 = p3; p3 = t; }
    if (ascending ? before(p1, p0) : before(p0, p1)) { t = p0; p0 = p1; p1 = t; }
    if (ascending ? before(p3, p2) : before(p2, p3)) { t = p2; p2 = p3; p3 = t; }
    pairs_in_place[at] = p0;
    pairs_in_place[at + h] = p1;
    pairs_in_place[at + 2u * h] = p2;
    pairs_in_place[at + 3u * h] = p3;
  } else if (STAGE == 3u) {
    uint tile_index = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    // Whole workgroups leave here, before any barrier.
    if (tile_index >= (pc[0] / len) * (P / LOCAL_PAIRS)) return;
    uint base = tile_index * LOCAL_PAIRS, lid = gl_LocalInvocationID.x, lanes = gl_WorkGroupSize.x;
    // The tile's first pair's index within its row (P is a power of two): what the direction
    // of a block of size P depends on.
    uint in_row = base & (P - 1u);
    for (uint t = lid; t < LOCAL_PAIRS; t += lanes) tile[t] = pairs_in_place[base + t];
    barrier();
    for (uint k = pc[17]; k <= pc[18]; k *= 2u) {
      for (uint j = min(k / 2u, LOCAL_PAIRS / 2u); j >= 1u; j /= 2u) {
        for (uint s = lid; s < LOCAL_PAIRS / 2u; s += lanes) {
          uint i = (s / j) * 2u * j + (s % j);
          Pair a = tile[i], b = tile[i + j];
          bool ascending = ((in_row + i) & k) == 0u;
          if (ascending ? before(b, a) : before(a, b)) {
            tile[i] = b;
            tile[i + j] = a;
          }
        }
        barrier();
      }
    }
    for (uint t = lid; t < LOCAL_PAIRS; t += lanes) pairs_in_place[base + t] = tile[t];
  } else {
    if (e >= pc[0]) return;
    uint row = e / len, i = e - row * len;
    uint base = row_base(row);
    uint source = uint(pairs[row * P + i].index);
    uint dst = base + i * stride;
    if (!ARGSORT) yt[dst] = x[base + source * stride];
    else if (WIDE_INDEX) y8[dst] = uint64_t(source);
    else y4[dst] = source;
  }
}
