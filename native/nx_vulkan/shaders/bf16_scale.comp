#version 450
// A bf16 GEMM operand as an f16 copy scaled by a power of two per line, for the f16 tensor cores
// (ops/matmul.rs bf16_tensor_cores), in two dispatches. The operand is read as [batch, L, K]
// through strides, a line being one row of A (L = M) or one column of B (L = N): the K elements
// one output's sum takes from it. bf16.glsl says how a line's largest and smallest magnitudes
// give its scale, or make it wide.
//
// Both passes walk tiles of 64 x 64 elements, 8 consecutive along the operand's unit-stride axis
// per load (one 16-byte load where the tile's rows are whole vectors), two loads per invocation
// (rows r and r + 32 of the tile), so a subgroup reads 4 runs of 128 bytes and all of an
// invocation's loads are in flight at once. (A first version, one pass of a workgroup per line
// or per 32 lines stepping along K with 2-byte loads, kept too few loads in flight: on the H100
// the 4096^3 bf16 GEMM took 1466 us against the f16 GEMM's 957.)
// Specialization constant 0 (MODE): bit 0 (LFAST) the lines are the unit-stride axis (A
// transposed, B row-major) and the tile's rows run along K, else along the lines; bit 1 the pass:
//   0, range: each line's largest magnitude and (0xffff minus) its smallest nonzero one, as bf16
//      bits without the sign, into ctl by atomicMax (ctl zeroed before);
//   1, copy: the f16 copy, its rows the tile rows' order: [batch][K][L] with LFAST, else
//      [batch][L][K]; a wide line's copy is zeros and ctl[0] gets bit 0.
// Workgroups: a 2-D grid over ceil(fast / 64) x ceil(slow / 64) x batch tiles, fast the
// unit-stride axis's size (L with LFAST, else K), slow the other.
// Bindings: 0 x (bf16 bits), 1 y (f16 bits, the copy; the range pass leaves it), 2 ctl (int:
// ctl[0] the wide flag, line i's two words at ctl[1 + 2 i] and ctl[2 + 2 i]).
// Push: pc[0] L, pc[1] K, pc[2] batch, pc[3] x offset, pc[4..6] x strides (batch, line, K),
// pc[7] the operand's first line in ctl (A's 0, B's batch x M).
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
layout(constant_id = 0) const uint MODE = 0;
const bool LFAST = (MODE & 1u) != 0u;
const bool COPY = (MODE & 2u) != 0u;
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) readonly buffer X { uint16_t x[]; };
layout(set = 0, binding = 0) readonly buffer X8 { uvec4 x8[]; };
layout(set = 0, binding = 1) writeonly buffer Y { uint16_t y[]; };
layout(set = 0, binding = 1) writeonly buffer Y8 { uvec4 y8[]; };
layout(set = 0, binding = 2) buffer Ctl { int ctl[]; };
#include "bf16.glsl"

// The tile's 64 lines: largest magnitude and 0xffff minus the smallest nonzero one.
shared uint tile_hi[64], tile_lo[64];

uint L, K, batch, fast_n, slow_n, b;
int base, fast_s, slow_s;
bool vec;

// The 8 elements of the tile's vector at (fast, slow), bits; zeros outside the operand.
uint[8] load8(uint fast, uint slow) {
  uint h[8];
  int at = base + int(slow) * slow_s + int(fast) * fast_s;
  if (vec && slow < slow_n && fast + 8u <= fast_n) {
    uvec4 v = x8[at / 8];
    [[unroll]] for (uint q = 0u; q < 8u; ++q) h[q] = (v[q / 2u] >> (16u * (q % 2u))) & 0xffffu;
  } else {
    [[unroll]] for (uint q = 0u; q < 8u; ++q)
      h[q] = (slow < slow_n && fast + q < fast_n) ? uint(x[at + int(q) * fast_s]) : 0u;
  }
  return h;
}

// Line `line` of the operand (of batch b)'s first word in ctl.
uint stats_at(uint line) { return 1u + 2u * (pc[7] + b * L + line); }

// Copy: vector (fast, slow)'s 8 elements h scaled by their lines' scales (one line, or 8).
void copy8(uint h[8], uint fast, uint slow) {
  if (slow >= slow_n || fast >= fast_n) return;
  uint f[8];
  bool wide = false;
  [[unroll]] for (uint q = 0u; q < 8u; ++q) {
    uint line = LFAST ? fast + q : slow;
    int s = line < L ? BF16_LINE_SCALE(ctl, pc[7] + b * L + line) : 0;
    wide = wide || s == BF16_WIDE;
    f[q] = s == BF16_WIDE ? 0u : bf16_to_f16_scaled(h[q], s);
  }
  if (wide) atomicOr(ctl[0], 1);
  uint o = (b * slow_n + slow) * fast_n + fast;
  if (fast + 8u <= fast_n && fast_n % 8u == 0u) {
    y8[o / 8u] =
        uvec4(f[0] | (f[1] << 16), f[2] | (f[3] << 16), f[4] | (f[5] << 16), f[6] | (f[7] << 16));
  } else {
    [[unroll]] for (uint q = 0u; q < 8u; ++q)
      if (fast + q < fast_n) y[o + q] = uint16_t(f[q]);
  }
}

void main() {
  L = pc[0];
  K = pc[1];
  batch = pc[2];
  fast_n = LFAST ? L : K;
  slow_n = LFAST ? K : L;
  int bs = int(pc[4]), ls = int(pc[5]), ks = int(pc[6]);
  fast_s = LFAST ? ls : ks;
  slow_s = LFAST ? ks : ls;
  uint tiles_fast = (fast_n + 63u) / 64u, tiles_slow = (slow_n + 63u) / 64u;
  uint tile = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  if (tile >= tiles_fast * tiles_slow * batch) return;
  b = tile / (tiles_fast * tiles_slow);
  uint fast0 = (tile % tiles_fast) * 64u, slow0 = ((tile / tiles_fast) % tiles_slow) * 64u;
  base = int(pc[3]) + int(b) * bs;
  vec = fast_s == 1 && base % 8 == 0 && slow_s % 8 == 0;
  uint tid = gl_LocalInvocationID.x;
  uint fast = fast0 + (tid % 8u) * 8u, slow = slow0 + tid / 8u;
  uint h0[8] = load8(fast, slow), h1[8] = load8(fast, slow + 32u);

  if (!COPY) {
    if (tid < 64u) {
      tile_hi[tid] = 0u;
      tile_lo[tid] = 0xffffu;
    }
    barrier();
    // A line is a fast index (LFAST: 8 lines a vector, 2 values each) or a slow one (16 values
    // of 2 lines).
    if (LFAST) {
      [[unroll]] for (uint q = 0u; q < 8u; ++q) {
        uint m0 = h0[q] & 0x7fffu, m1 = h1[q] & 0x7fffu;
        uint lo = min(m0 == 0u ? 0xffffu : m0, m1 == 0u ? 0xffffu : m1);
        atomicMax(tile_hi[(tid % 8u) * 8u + q], max(m0, m1));
        atomicMin(tile_lo[(tid % 8u) * 8u + q], lo);
      }
    } else {
      uint hi0 = 0u, hi1 = 0u, lo0 = 0xffffu, lo1 = 0xffffu;
      [[unroll]] for (uint q = 0u; q < 8u; ++q) {
        uint m0 = h0[q] & 0x7fffu, m1 = h1[q] & 0x7fffu;
        hi0 = max(hi0, m0);
        hi1 = max(hi1, m1);
        if (m0 != 0u) lo0 = min(lo0, m0);
        if (m1 != 0u) lo1 = min(lo1, m1);
      }
      atomicMax(tile_hi[tid / 8u], hi0);
      atomicMin(tile_lo[tid / 8u], lo0);
      atomicMax(tile_hi[tid / 8u + 32u], hi1);
      atomicMin(tile_lo[tid / 8u + 32u], lo1);
    }
    barrier();
    uint line = (LFAST ? fast0 : slow0) + tid;
    if (tid < 64u && line < L && tile_hi[tid] != 0u) {
      uint at = stats_at(line);
      atomicMax(ctl[at], int(tile_hi[tid]));
      atomicMax(ctl[at + 1u], int(0xffffu - tile_lo[tid]));
    }
    return;
  }

  copy8(h0, fast, slow);
  copy8(h1, fast, slow + 32u);
}
