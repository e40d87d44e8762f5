#version 450
// The discrete Fourier transform of rows of c128 values (dvec2), computed the way
// Nx.BinaryBackend computes it, so that results agree to the last bit but where the device's
// sin/cos of a twiddle angle differs from glibc's in the last place:
//   * n a power of two or n < 1024: recursive radix-2 (decimation in time) down to leaves of odd
//     length m, each a direct DFT summed in index order; the same angle expressions in f64
//     (leaf: ((-2 pi / m) k) i; butterfly: (-2 pi k) / L) and the complex library's product
//     (re = a.re b.re - a.im b.im, im = a.im b.re + a.re b.im);
//   * otherwise Bluestein's algorithm with M = 2^ceil(log2(2n - 1)), chirp w_k = e^(-i pi k^2 / n).
// ifft is conj(fft(conj(x))) / n, divided as the complex library divides by a real number.
//
// Bindings: 0 src and 1 aux are read, 2 dst is written (the queue's hazard tracking relies on
// every kernel writing only its last binding).
// Ops (specialization constant 0), with the push constants each reads:
//   0 leaf:      dst[row, b m + k] = DFT_m over i of src[row, r + 2^p i], r = bitreverse_p(b);
//                src conjugated on load when pc[5] & 1. One invocation per output element.
//   1 stage:     in place on dst: butterflies pairing (q L + k, q L + h + k), h = pc[4], L = 2h.
//   2 finish:    in place on dst: if pc[5] & 2, conj(z) / pc[1]; then |re|, |im| <= eps -> 0.
//   3 prepare:   Bluestein: dst[row, j] = w_j src[row, j] (conj'd first when pc[5] & 1) for
//                j < n, 0 up to M.
//   4 multiply:  dst[row, j] = conj(dst[row, j] aux[j]) (the inverse transform's conjugation).
//   5 chirp:     dst[row, k] = (conj(src[row, k]) / M) w_k for k < n (src rows have length M).
//   6 filter:    dst[j] = the chirp filter conj(w) laid out circularly over M.
// pc[0] rows, pc[1] n, pc[2] m (leaf length), pc[3] p (radix-2 levels), pc[4] h, pc[5] flags,
// pc[6] invocations, pc[7] M, pc[8..9] eps as f64 bits (low, high).
#include "common.glsl"
#include "math64.glsl"
#include "complex_math.glsl"
layout(local_size_x_id = 3) in;
layout(constant_id = 0) const uint OP = 0;
layout(set = 0, binding = 0) readonly buffer Src { dvec2 src[]; };
layout(set = 0, binding = 1) readonly buffer Aux { dvec2 aux[]; };
layout(set = 0, binding = 2) buffer Dst { dvec2 dst[]; };

const double MINUS_TWO_PI = -6.283185307179586lf;
const double MINUS_PI = -3.141592653589793lf;

dvec2 polar(double angle) { return angle == 0.0lf ? dvec2(1.0lf, 0.0lf) : dvec2(cos64(angle), sin64(angle)); }

// e^(-i pi j^2 / n), the chirp, with the BinaryBackend's (-pi j^2) / n.
dvec2 chirp(uint j, uint n) {
  precise double angle = (MINUS_PI * double(uint64_t(j) * uint64_t(j))) / double(n);
  return dvec2(cos64(angle), sin64(angle));
}

void main() {
  uint id = element_index();
  if (id >= pc[6]) return;
  uint n = pc[1];
  bool conj_in = (pc[5] & 1u) != 0u;

  if (OP == 0u) {
    uint m = pc[2];
    uint p = pc[3];
    uint row = id / n;
    uint j = id - row * n;
    uint b = j / m;
    uint k = j - b * m;
    uint r = p == 0u ? 0u : bitfieldReverse(b) >> (32u - p);
    uint base = row * n + r;
    uint step = 1u << p;
    dvec2 sum;
    if (m == 1u || k == 0u) {
      sum = src[base];
      if (conj_in) sum = conj(sum);
      for (uint i = 1u; i < m; ++i) {
        dvec2 x = src[base + i * step];
        sum += conj_in ? conj(x) : x;
      }
    } else {
      precise double phase = (MINUS_TWO_PI / double(m)) * double(k);
      sum = dvec2(0.0lf);
      for (uint i = 0u; i < m; ++i) {
        dvec2 x = src[base + i * step];
        if (conj_in) x = conj(x);
        precise double angle = phase * double(i);
        dvec2 t = cmul(x, polar(angle));
        sum = i == 0u ? t : sum + t;
      }
    }
    dst[row * n + j] = sum;
  } else if (OP == 1u) {
    uint h = pc[4];
    uint row = id / (n / 2u);
    uint pair = id - row * (n / 2u);
    uint q = pair / h;
    uint k = pair - q * h;
    uint lo = row * n + q * 2u * h + k;
    precise double angle = (MINUS_TWO_PI * double(k)) / double(2u * h);
    dvec2 w = dvec2(cos64(angle), sin64(angle));
    dvec2 e = dst[lo];
    dvec2 t = cmul(w, dst[lo + h]);
    dst[lo] = e + t;
    dst[lo + h] = e - t;
  } else if (OP == 2u) {
    dvec2 z = dst[id];
    if ((pc[5] & 2u) != 0u) z = cdiv(conj(z), dvec2(double(n), 0.0lf));
    double eps = packDouble2x32(uvec2(pc[8], pc[9]));
    if (abs(z.x) <= eps) z.x = 0.0lf;
    if (abs(z.y) <= eps) z.y = 0.0lf;
    dst[id] = z;
  } else if (OP == 3u) {
    uint big = pc[7];
    uint row = id / big;
    uint j = id - row * big;
    if (j < n) {
      dvec2 x = src[row * n + j];
      dst[id] = cmul(chirp(j, n), conj_in ? conj(x) : x);
    } else {
      dst[id] = dvec2(0.0lf);
    }
  } else if (OP == 6u) {
    // b = conj(w_0 .. w_{n-1}), zeros, conj(w_{n-1} .. w_1)
    uint big = pc[7];
    uint j = id;
    if (j < n) dst[j] = conj(chirp(j, n));
    else if (j <= big - n) dst[j] = dvec2(0.0lf);
    else dst[j] = conj(chirp(big - j, n));
  } else if (OP == 4u) {
    uint big = pc[7];
    uint j = id % big;
    dst[id] = conj(cmul(dst[id], aux[j]));
  } else if (OP == 5u) {
    uint big = pc[7];
    uint row = id / n;
    uint k = id - row * n;
    dvec2 z = cdiv(conj(src[row * big + k]), dvec2(double(big), 0.0lf));
    dst[id] = cmul(z, chirp(k, n));
  }
}
