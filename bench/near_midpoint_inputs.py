"""Finds f64 inputs whose exp and log results lie within 0.01 ulp of a rounding midpoint (pow:
0.1 ulp, the accuracy of its y log x tail),
with the correctly rounded answer (Python's decimal module at 60 digits), for the exactness test
in test/nx_vulkan/exactness_test.exs. Such inputs need every exact step of the double-double
routines (Dekker's product, the compensated sums): a step a compiler had fused or reordered
moves the result across the midpoint. Prints Elixir tuples {input(s) bits, result bits}.

    python3 bench/near_midpoint_inputs.py [count per function]
"""
import math
import random
import struct
import sys
from decimal import Decimal, getcontext

getcontext().prec = 60


def bits(x):
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def near_midpoint(exact, band):
    d = float(exact)  # correctly rounded
    if not math.isfinite(d) or d == 0.0:
        return None
    pos = (exact - Decimal(d)) / Decimal(math.ulp(d))
    return d if abs(abs(pos) - Decimal("0.5")) < Decimal(band) else None


def search(name, band, draw, exact, count, rng):
    found = []
    while len(found) < count:
        args = draw(rng)
        d = near_midpoint(exact(*args), band)
        if d is not None:
            found.append((args, d))
    rows = ", ".join(
        "{" + ", ".join(f"0x{bits(a):016X}" for a in args) + f", 0x{bits(d):016X}" + "}"
        for args, d in found
    )
    print(f"{name}: [{rows}]")


def main():
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 12
    rng = random.Random(2026)
    search("exp", 0.01, lambda r: (r.uniform(-700.0, 700.0),), lambda x: Decimal(x).exp(), count, rng)
    search("log", 0.01, lambda r: (math.ldexp(r.uniform(1.0, 2.0), r.randint(-1000, 1000)),),
           lambda x: Decimal(x).ln(), count, rng)
    search("pow", 0.1, lambda r: (r.uniform(0.01, 100.0), r.uniform(-60.0, 60.0)),
           lambda x, y: (Decimal(y) * Decimal(x).ln()).exp(), count, rng)


main()
