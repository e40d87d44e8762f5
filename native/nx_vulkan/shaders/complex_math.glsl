// Complex arithmetic in f64 pairs as the complex library (and so Nx.BinaryBackend) forms it:
// (a + bi)(c + di) = (ac - bd) + (bc + ad)i; a quotient multiplies by the conjugate and divides
// by c^2 + d^2 (also for a real divisor, as (d, 0)). `precise`: no fused multiply-adds.
dvec2 cmul(dvec2 a, dvec2 b) {
  precise double re = a.x * b.x - a.y * b.y;
  precise double im = a.y * b.x + a.x * b.y;
  return dvec2(re, im);
}

dvec2 cdiv(dvec2 a, dvec2 b) {
  precise double den = b.x * b.x + b.y * b.y;
  precise double re = (a.x * b.x + a.y * b.y) / den;
  precise double im = (a.y * b.x - a.x * b.y) / den;
  return dvec2(re, im);
}

dvec2 conj(dvec2 a) { return dvec2(a.x, -a.y); }
