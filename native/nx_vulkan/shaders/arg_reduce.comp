#version 450
// argmax / argmin over any set of axes, one invocation per output element scanning its reduced
// elements in order, with Nx.BinaryBackend's rules: ties go to the first index (or the last with
// tie_break: :high); a NaN always takes the place (so the last NaN wins) and only a NaN
// replaces a NaN. Defines: T element, W compute type, IS_INT.
// Specialization: constant 0 = op | tie << 1 | (index bytes == 8) << 2, with op 0 argmax,
// 1 argmin and tie 1 for :high. Bindings: 0 x (read), 1 y (write; s32/u32 or s64/u64 indices,
// declared twice). Push constants as reduce.comp. Dispatch: elementwise grid over the outputs.
#include "common.glsl"
layout(local_size_x_id = 3) in;
layout(constant_id = 0) const uint OP = 0;
layout(set = 0, binding = 0) readonly buffer X { T x[]; };
layout(set = 0, binding = 1) writeonly buffer Y4 { uint y4[]; };
layout(set = 0, binding = 1) writeonly buffer Y8 { uint64_t y8[]; };

#ifdef IS_INT
#define IS_NAN(v) false
#else
#define IS_NAN(v) isnan(v)
#endif

void main() {
  uint n_out = pc[0], n_red = pc[1], kept_rank = pc[2], red_rank = pc[3];
  uint o = element_index();
  if (o >= n_out) return;
  bool argmin = (OP & 1u) != 0u;
  bool high = (OP & 2u) != 0u;
  uint base = strided(o, kept_rank, 5, 11, pc[4]);
  W best = W(x[strided(0, red_rank, 17, 23, base)]);
  uint best_i = 0;
  for (uint r = 1; r < n_red; ++r) {
    W v = W(x[strided(r, red_rank, 17, 23, base)]);
    bool better = argmin ? v < best : v > best;
    if (IS_NAN(v) || (!IS_NAN(best) && (better || (high && v == best)))) {
      best = v;
      best_i = r;
    }
  }
  if ((OP & 4u) != 0u) y8[o] = uint64_t(best_i); else y4[o] = best_i;
}
