// Complex arithmetic in f64 pairs as the complex library (and so Nx.BinaryBackend) forms it:
// (a + bi)(c + di) = (ac - bd) + (bc + ad)i; a quotient multiplies by the conjugate and divides
// by c^2 + d^2 (also for a real divisor, as (d, 0)). `precise`: no fused multiply-adds.
dvec2 cmul(dvec2 a, dvec2 b) {
  precise double re = a.x * b.x - a.y * b.y;
  precise double im = a.y * b.x + a.x * b.y;
  return dvec2(re, im);
}

// The complex library's real quotient of the parts: a finite number over an infinite one is
// +0 (it answers 0 whatever the signs), anything else as IEEE.
double lib_div(double x, double y) {
  return (isinf(y) && !isinf(x) && !isnan(x)) ? 0.0lf : x / y;
}

dvec2 cdiv(dvec2 a, dvec2 b) {
  // Its one special case: a finite dividend over (+-Inf, 0) is 0 (IEEE steps would give NaN).
  bool finite_a = !(isinf(a.x) || isnan(a.x) || isinf(a.y) || isnan(a.y));
  if (finite_a && isinf(b.x) && b.y == 0.0lf) return dvec2(0.0lf);
  precise double den = b.x * b.x + b.y * b.y;
  precise double re = a.x * b.x + a.y * b.y;
  precise double im = a.y * b.x - a.x * b.y;
  return dvec2(lib_div(re, den), lib_div(im, den));
}

dvec2 conj(dvec2 a) { return dvec2(a.x, -a.y); }
