#version 450
// sort / argsort of long rows by a bitonic network over (key, index) pairs, padded to a power of
// two P per row: log2(P) (log2(P) + 1) / 2 compare-exchange passes, one dispatch each, instead of
// sort.comp's O(len^2) ranks. Keys are the values mapped to u64 so that unsigned order is Nx's
// order (NaN largest, -0.0 equal to 0.0; bit-inverted for :desc), ties broken by the original
// index, so the result is sort.comp's: stable, in both directions. Pad pairs sort last.
// Defines: T element, W compute type, IS_INT (+ IS_SIGNED) as sort.comp.
// Specialization: constant 0 = op | desc << 2 | argsort << 3 | (index bytes == 8) << 4, op 0 load
// (bindings 0 x read, 1 pairs write), 1 pass (binding 0 pairs, read and written), 2 store
// (0 x read, 1 pairs read, 2 out write: values as T, or u32/u64 indices).
// Push: pc[0] n (rows * len), pc[1] len, pc[2] axis stride, pc[3] kept rank, pc[4..10] kept dims,
//       pc[10..16] kept strides, pc[16] P, pc[17] pass distance j, pc[18] block size k.
// Dispatch: one invocation per pair slot (load), per compared pair (pass), per element (store).
#include "common.glsl"
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
layout(local_size_x_id = 3) in;
layout(constant_id = 0) const uint OP = 0;
const uint STAGE = OP & 3u;
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
