#version 450
// sort / argsort of long rows by a stable least-significant-digit radix sort, 8 bits a pass:
// 1 pass for 8-bit types, 2 for 16-bit, 4 for 32-bit, 8 for 64-bit (KEY64). Each pass is three
// dispatches: HIST counts each tile's digits, SCAN turns the counts into each (row, digit, tile)'s
// offset and each (row, digit)'s total, SCATTER moves each key to its place. Keys are the raw
// element bits mapped so that unsigned order is Nx's order (NaN largest, -0.0 equal to 0.0, all
// bits inverted for :desc), so the result is sort.comp's and sort_bitonic.comp's: stable in both
// directions. The first pass reads the elements themselves (index = position in the row), the
// last writes the output (the values, from their keys, or the indices).
//
// A tile is TILE consecutive elements of one row, one workgroup of 256. SCATTER ranks a tile's
// keys stably with subgroup ballots: each subgroup takes a contiguous slice of K * S keys, K
// rounds of S; in a round the lanes holding one digit find each other with 8 ballots, and each
// subgroup keeps a count per digit (two 16-bit counts a word) in shared memory. The host uses this
// kernel where the subgroup size S is 8 to 128 and divides 256 (ops/reduce.rs).
//
// Specialization constant 0: stage (bits 0-1: 0 HIST, 1 SCAN, 2 SCATTER) | desc << 2 |
//   argsort << 3 | (index bytes == 8) << 4 | kind << 5 (0 unsigned, 1 signed, 2 float) |
//   log2(element bytes) << 7 | serial scan << 9 (rows of few tiles: SCAN takes one (row, digit)
//   an invocation instead of a workgroup).
// Bindings: 0 x (read), 1 keys in, 2 indices in, 3 counts (rows x 256 x tiles per row), 4 totals
//   (rows x 256), 5 keys out, 6 indices out, 7 out (values as x's type, or u32/u64 indices).
// Push: pc[0] rows, pc[1] len, pc[2] axis stride, pc[3] kept rank, pc[4..10] kept dims,
//   pc[10..16] kept strides (output and input share the shape), pc[16] tiles per row, pc[17] the
//   pass's shift (bits), pc[18] first pass, pc[19] last pass.
// Dispatch: one workgroup per tile (HIST, SCATTER), per (row, digit) (SCAN) or per 256 of them
// (serial SCAN), on a 2-D grid.
#include "common.glsl"
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_ballot : require
layout(local_size_x = 256) in;
layout(constant_id = 0) const uint OP = 0;
const uint STAGE = OP & 3u;
const bool DESC = (OP & 4u) != 0u;
const bool ARGSORT = (OP & 8u) != 0u;
const bool WIDE_INDEX = (OP & 16u) != 0u;
const uint KIND = (OP >> 5u) & 3u;
const uint WIDTH_LOG = (OP >> 7u) & 3u;
const uint BITS = 8u << WIDTH_LOG;
const bool SERIAL_SCAN = (OP & 512u) != 0u;

const uint WG = 256u;
const uint K = 8u;
const uint TILE = WG * K;
// Subgroups of 8+ lanes: at most 32 of them, 128 words of digit counts each.
const uint MAX_SUBGROUPS = 32u;

#ifdef KEY64
#define KEY uint64_t
const uint KEY_BITS = 64u;
#else
#define KEY uint
const uint KEY_BITS = 32u;
#endif

layout(set = 0, binding = 0) readonly buffer X8 { uint8_t x8[]; };
layout(set = 0, binding = 0) readonly buffer X16 { uint16_t x16[]; };
layout(set = 0, binding = 0) readonly buffer X32 { uint x32[]; };
layout(set = 0, binding = 1) readonly buffer KeysIn { KEY keys_in[]; };
layout(set = 0, binding = 2) readonly buffer IdxIn { uint idx_in[]; };
layout(set = 0, binding = 3) buffer Counts { uint counts[]; };
layout(set = 0, binding = 4) buffer Totals { uint totals[]; };
layout(set = 0, binding = 5) writeonly buffer KeysOut { KEY keys_out[]; };
layout(set = 0, binding = 6) writeonly buffer IdxOut { uint idx_out[]; };
layout(set = 0, binding = 7) writeonly buffer O8 { uint8_t o8[]; };
layout(set = 0, binding = 7) writeonly buffer O16 { uint16_t o16[]; };
layout(set = 0, binding = 7) writeonly buffer O32 { uint o32[]; };
#ifdef KEY64
layout(set = 0, binding = 0) readonly buffer X64 { uint64_t x64[]; };
layout(set = 0, binding = 7) writeonly buffer O64 { uint64_t o64[]; };
#endif
layout(set = 0, binding = 7) writeonly buffer OI8 { uint64_t oi8[]; };

shared uint scan_buf[WG];
shared uint digit_base[256];
// Per subgroup, the count of each digit (two 16-bit counts a word); then (32-bit keys) the
// tile's keys and indices sorted by digit.
shared uint tile_shared[MAX_SUBGROUPS * 128];
shared uint local_start[256];

KEY raw_at(uint off) {
  if (WIDTH_LOG == 0u) return KEY(x8[off]);
  if (WIDTH_LOG == 1u) return KEY(x16[off]);
#ifdef KEY64
  if (WIDTH_LOG == 2u) return KEY(x32[off]);
  return x64[off];
#else
  return x32[off];
#endif
}

void store_raw(uint off, KEY v) {
  if (WIDTH_LOG == 0u) o8[off] = uint8_t(v);
  else if (WIDTH_LOG == 1u) o16[off] = uint16_t(v);
#ifdef KEY64
  else if (WIDTH_LOG == 2u) o32[off] = uint(v);
  else o64[off] = v;
#else
  else o32[off] = v;
#endif
}

// The element's bits as a key whose unsigned order is the sort's order.
KEY order_key(KEY b) {
  KEY all = BITS == KEY_BITS ? ~KEY(0) : (KEY(1) << BITS) - KEY(1);
  KEY sign = KEY(1) << (BITS - 1u);
  KEY k = b;
  if (KIND == 1u) {
    k = b ^ sign;
  } else if (KIND == 2u) {
    // Exponent all ones: f16 0x7C00, f32 0x7F800000, f64 0x7FF0000000000000.
    uint exp_bits = WIDTH_LOG == 1u ? 5u : (WIDTH_LOG == 2u ? 8u : 11u);
    KEY inf = ((KEY(1) << exp_bits) - KEY(1)) << (BITS - 1u - exp_bits);
    KEY mag = b & ~sign & all;
    if (mag > inf) k = all;                            // NaN: largest, every NaN alike
    else if (mag == KEY(0)) k = sign;                  // -0.0 ties with 0.0
    else k = (b & sign) != KEY(0) ? (~b & all) : (b | sign);
  }
  return DESC ? (~k & all) : k;
}

uint digit(KEY k) { return uint((k >> pc[17]) & KEY(255)); }

// Offset of the row's first element in x and in the output.
uint row_base(uint row) { return strided(row, pc[3], 4u, 10u, 0u); }

KEY key_at(uint row, uint i, uint base) {
  return pc[18] != 0u ? order_key(raw_at(base + i * pc[2])) : keys_in[row * pc[1] + i];
}

uint index_at(uint row, uint i) { return pc[18] != 0u ? i : idx_in[row * pc[1] + i]; }

// Inclusive prefix sum of one value per invocation over the workgroup.
uint workgroup_inclusive(uint v) {
  uint lid = gl_LocalInvocationIndex;
  scan_buf[lid] = v;
  barrier();
  for (uint off = 1u; off < WG; off <<= 1u) {
    uint add = lid >= off ? scan_buf[lid - off] : 0u;
    barrier();
    scan_buf[lid] += add;
    barrier();
  }
  uint r = scan_buf[lid];
  barrier();
  return r;
}

// The element whose key is `k` (the key's inverse), read from x at `id` only where the key
// merged values (NaN, -0.0 with 0.0).
KEY value_of(KEY k, uint id, uint base) {
  KEY all = BITS == KEY_BITS ? ~KEY(0) : (KEY(1) << BITS) - KEY(1);
  KEY sign = KEY(1) << (BITS - 1u);
  if (DESC) k = ~k & all;
  if (KIND == 0u) return k;
  if (KIND == 1u) return k ^ sign;
  if (k == all || k == sign) return raw_at(base + id * pc[2]);
  return (k & sign) != KEY(0) ? (k & ~sign) : (~k & all);
}

// Writes the key of sorted position `dst` (of the whole key buffer): to the next pass's keys, or
// (last pass) its value or index to the output.
void place(uint row, uint base, uint dst, KEY key, uint id) {
  if (pc[19] == 0u) {
    keys_out[dst] = key;
    idx_out[dst] = id;
  } else {
    uint at = base + (dst - row * pc[1]) * pc[2];
    if (!ARGSORT) store_raw(at, value_of(key, id, base));
    else if (WIDE_INDEX) oi8[at] = uint64_t(id);
    else o32[at] = id;
  }
}

void main() {
  uint group = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  uint lid = gl_LocalInvocationIndex;
  uint rows = pc[0], len = pc[1], tiles = pc[16];

  if (STAGE == 1u && SERIAL_SCAN) {
    // SCAN of rows of few tiles: one (row, digit) an invocation.
    uint pair = group * WG + lid;
    if (pair >= rows * 256u) return;
    uint running = 0u;
    for (uint t = 0u; t < tiles; ++t) {
      uint c = counts[pair * tiles + t];
      counts[pair * tiles + t] = running;
      running += c;
    }
    totals[pair] = running;
    return;
  }
  if (STAGE == 1u) {
    // SCAN: one (row, digit) a workgroup: exclusive prefix over the row's tiles, and the total.
    if (group >= rows * 256u) return;
    uint at = group * tiles;
    uint running = 0u;
    for (uint c = 0u; c < tiles; c += WG) {
      uint v = c + lid < tiles ? counts[at + c + lid] : 0u;
      uint inclusive = workgroup_inclusive(v);
      if (c + lid < tiles) counts[at + c + lid] = running + inclusive - v;
      scan_buf[lid] = inclusive;
      barrier();
      running += scan_buf[WG - 1u];
      barrier();
    }
    if (lid == 0u) totals[group] = running;
    return;
  }

  if (group >= rows * tiles) return;
  uint row = group / tiles, tile = group - row * tiles;
  uint start = tile * TILE, end = min(start + TILE, len);
  uint base = row_base(row);

  if (STAGE == 0u) {
    // HIST: the tile's digit counts.
    digit_base[lid] = 0u;
    barrier();
    for (uint i = start + lid; i < end; i += WG) atomicAdd(digit_base[digit(key_at(row, i, base))], 1u);
    barrier();
    counts[(row * 256u + lid) * tiles + tile] = digit_base[lid];
    return;
  }

  // SCATTER. Where each digit's keys of this tile start: the row's keys of smaller digits, then
  // this digit's keys of earlier tiles.
  uint total = totals[row * 256u + lid];
  uint smaller = workgroup_inclusive(total) - total;
  digit_base[lid] = row * len + smaller + counts[(row * 256u + lid) * tiles + tile];
  for (uint w = lid; w < MAX_SUBGROUPS * 128u; w += WG) tile_shared[w] = 0u;
  barrier();

  uint lanes = gl_SubgroupSize, sg = gl_SubgroupID, lane = gl_SubgroupInvocationID;
  uint slice = start + sg * K * lanes;
  KEY keys[K];
  uint ids[K], ranks[K];
  for (uint k = 0u; k < K; ++k) {
    uint i = slice + k * lanes + lane;
    bool valid = i < end;
    KEY key = valid ? key_at(row, i, base) : KEY(0);
    uint d = digit(key);
    // The lanes of this round holding digit d.
    uvec4 peers = subgroupBallot(valid);
    for (uint b = 0u; b < 8u; ++b) {
      bool bit = ((d >> b) & 1u) != 0u;
      uvec4 ones = subgroupBallot(bit);
      peers &= bit ? ones : ~ones;
    }
    uint before = subgroupBallotExclusiveBitCount(peers);
    uint word = sg * 128u + (d >> 1u), shift = (d & 1u) * 16u;
    ranks[k] = ((tile_shared[word] >> shift) & 0xFFFFu) + before;
    keys[k] = key;
    ids[k] = valid ? index_at(row, i) : 0u;
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    if (valid && before == 0u) atomicAdd(tile_shared[word], subgroupBallotBitCount(peers) << shift);
    subgroupMemoryBarrierShared();
    subgroupBarrier();
  }
  barrier();
  // Each digit's keys in earlier subgroups of the tile (two digits a word: a tile's count of one
  // digit is at most TILE, so the halves never carry into each other), and the tile's count of
  // each digit.
  if (lid < 128u) {
    uint running = 0u;
    for (uint s = 0u; s < gl_NumSubgroups; ++s) {
      uint c = tile_shared[s * 128u + lid];
      tile_shared[s * 128u + lid] = running;
      running += c;
    }
    local_start[2u * lid] = running & 0xFFFFu;
    local_start[2u * lid + 1u] = running >> 16u;
  }
  barrier();
  for (uint k = 0u; k < K; ++k) {
    uint d = digit(keys[k]);
    ranks[k] += (tile_shared[sg * 128u + (d >> 1u)] >> ((d & 1u) * 16u)) & 0xFFFFu;
  }
#ifndef KEY64
  // The tile's keys sorted by digit in shared memory first, so that the global writes of each
  // digit's run are contiguous (coalesced) rather than one scattered word per key.
  uint tile_count = local_start[lid];
  uint smaller_here = workgroup_inclusive(tile_count) - tile_count;
  local_start[lid] = smaller_here;
  barrier();
  for (uint k = 0u; k < K; ++k) {
    if (slice + k * lanes + lane >= end) continue;
    uint at = local_start[digit(keys[k])] + ranks[k];
    tile_shared[at] = keys[k];
    tile_shared[TILE + at] = ids[k];
  }
  barrier();
  for (uint j = lid; j < end - start; j += WG) {
    KEY key = tile_shared[j];
    uint d = digit(key);
    place(row, base, digit_base[d] + j - local_start[d], key, tile_shared[TILE + j]);
  }
#else
  for (uint k = 0u; k < K; ++k) {
    if (slice + k * lanes + lane >= end) continue;
    place(row, base, digit_base[digit(keys[k])] + ranks[k], keys[k], ids[k]);
  }
#endif
}
