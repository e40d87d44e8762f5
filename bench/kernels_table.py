"""Joins the outputs of bench/kernels.exs (ours) and bench/peers_kernels.py (PyTorch) into one
Markdown table: time per op, throughput (TFLOP/s or TB/s) and the ratio ours / PyTorch.

    python3 bench/kernels_table.py ours.txt torch.txt
"""
import sys


def read(path):
    rows, header = {}, []
    for line in open(path):
        line = line.rstrip("\n")
        if line.startswith("#"):
            header.append(line[2:])
        elif "\t" in line:
            name, us, work = line.split("\t")
            rows[name] = (float(us), work)
    return rows, header


def rate(us, work):
    kind, amount = work.split("=")
    per_s = float(amount) / (us * 1e-6)
    return f"{per_s / 1e12:.2f} TFLOP/s" if kind == "flops" else f"{per_s / 1e12:.2f} TB/s"


ours, h1 = read(sys.argv[1])
peer, h2 = read(sys.argv[2])
for h in h1 + h2:
    print(f"- {h}")
print()
print("| kernel | nx_vulkan µs | nx_vulkan | PyTorch µs | PyTorch | ours / PyTorch |")
print("|---|---|---|---|---|---|")
for name, (us, work) in ours.items():
    if name in peer:
        pus, _ = peer[name]
        print(f"| {name} | {us:.1f} | {rate(us, work)} | {pus:.1f} | {rate(pus, work)} | {pus / us:.2f} |")
    else:
        print(f"| {name} | {us:.1f} | {rate(us, work)} | — | — | — |")
