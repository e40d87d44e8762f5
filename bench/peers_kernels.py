"""The rows of bench/kernels.exs in PyTorch (CUDA, fp32 with TF32 off), timed the same way: the op
run `reps` times, then synchronised; best of 3 rounds after a warm-up round. Prints
"name<TAB>us per op<TAB>work" lines.

    python3 bench/peers_kernels.py
"""
import sys
import time

import torch

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
dev = torch.device("cuda")
g = torch.Generator(device=dev).manual_seed(1)
M64 = 64 * 1024 * 1024


def rand(*shape, dtype=torch.float32):
    return torch.rand(*shape, device=dev, generator=g).to(dtype)


def timed(name, reps, work, args, fun):
    # Row names on the command line time only those (as bench/kernels.exs).
    if sys.argv[1:] and name not in sys.argv[1:]:
        return

    def one_round():
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(reps):
            fun(*args)
        torch.cuda.synchronize()
        return (time.perf_counter() - t0) * 1e6 / reps

    one_round()
    best = min(one_round() for _ in range(3))
    print(f"{name}\t{best:.2f}\t{work}", flush=True)


print(f"# device {torch.cuda.get_device_name()}, torch {torch.__version__}")
for name, m, k, n, dt in [
    ("gemm f32 1024^3", 1024, 1024, 1024, torch.float32),
    ("gemm f32 2048^3", 2048, 2048, 2048, torch.float32),
    ("gemm f32 4096^3", 4096, 4096, 4096, torch.float32),
    ("gemm f16 4096^3", 4096, 4096, 4096, torch.float16),
    ("gemm bf16 4096^3", 4096, 4096, 4096, torch.bfloat16),
    ("gemm f32 32x784x128 (MNIST)", 32, 784, 128, torch.float32),
]:
    timed(name, 10, f"flops={2 * m * k * n}", (rand(m, k, dtype=dt), rand(k, n, dtype=dt)), torch.matmul)

timed("gemm f32 x^T g (784x32x128)", 20, f"flops={2 * 784 * 32 * 128}", (rand(32, 784), rand(32, 128)), lambda a, b: a.t() @ b)
timed("gemm f32 g w^T (32x128x784)", 20, f"flops={2 * 32 * 128 * 784}", (rand(32, 128), rand(784, 128)), lambda a, b: a @ b.t())
# The GEMMs of the kernel-bound MNIST step (batch 512, 784-2048-10), as in bench/kernels.exs.
timed("gemm f32 512x784x2048 (MNIST large)", 20, f"flops={2 * 512 * 784 * 2048}", (rand(512, 784), rand(784, 2048)), torch.matmul)
timed("gemm f32 512x2048x10 (MNIST large)", 20, f"flops={2 * 512 * 2048 * 10}", (rand(512, 2048), rand(2048, 10)), torch.matmul)
timed("gemm f32 x^T g (784x512x2048)", 20, f"flops={2 * 784 * 512 * 2048}", (rand(512, 784), rand(512, 2048)), lambda a, b: a.t() @ b)
timed("gemm f32 h^T g (2048x512x10)", 20, f"flops={2 * 2048 * 512 * 10}", (rand(512, 2048), rand(512, 10)), lambda a, b: a.t() @ b)
timed("gemm f32 g w^T (512x10x2048)", 20, f"flops={2 * 512 * 10 * 2048}", (rand(512, 10), rand(2048, 10)), lambda a, b: a @ b.t())
timed("gemm f32 batched 64x256^3", 10, f"flops={64 * 2 * 256 ** 3}", (rand(64, 256, 256), rand(64, 256, 256)), torch.bmm)
timed("add f32 64M", 10, f"bytes={12 * M64}", (rand(M64), rand(M64)), torch.add)
timed("exp f32 64M", 10, f"bytes={8 * M64}", (rand(M64),), torch.exp)
timed("sigmoid f32 64M", 10, f"bytes={8 * M64}", (rand(M64),), torch.sigmoid)
timed("cast f32->f16 64M", 10, f"bytes={6 * M64}", (rand(M64),), lambda x: x.to(torch.float16))
timed("cast f16->f32 64M", 10, f"bytes={6 * M64}", (rand(M64).to(torch.float16),), lambda x: x.to(torch.float32))
timed("sum f32 64M", 10, f"bytes={4 * M64}", (rand(M64),), torch.sum)
timed("sum rows f32 8192^2", 10, f"bytes={4 * M64}", (rand(8192, 8192),), lambda x: x.sum(1))
timed("sum columns f32 8192^2", 10, f"bytes={4 * M64}", (rand(8192, 8192),), lambda x: x.sum(0))
timed("transpose f32 8192^2", 10, f"bytes={8 * M64}", (rand(8192, 8192),), lambda x: x.t().contiguous())


def softmax_rows(x):
    e = torch.exp(x)
    return e / e.sum(1, keepdim=True)


timed("softmax rows f32 8192^2", 10, f"bytes={8 * M64}", (rand(8192, 8192),), softmax_rows)
timed("conv2d f32 3x3 64->64 56x56 b32", 5, f"flops={2 * 32 * 64 * 56 * 56 * 64 * 9}",
      (rand(32, 64, 56, 56), rand(64, 64, 3, 3)), lambda x, k: torch.nn.functional.conv2d(x, k, padding=1))
timed("conv2d f32 3x3 128->128 28x28 b32", 5, f"flops={2 * 32 * 128 * 28 * 28 * 128 * 9}",
      (rand(32, 128, 28, 28), rand(128, 128, 3, 3)), lambda x, k: torch.nn.functional.conv2d(x, k, padding=1))
timed("conv2d f32 3x3 256->256 14x14 b32", 5, f"flops={2 * 32 * 256 * 14 * 14 * 256 * 9}",
      (rand(32, 256, 14, 14), rand(256, 256, 3, 3)), lambda x, k: torch.nn.functional.conv2d(x, k, padding=1))
timed("conv2d f32 7x7/2 3->64 224x224 b8", 5, f"flops={2 * 8 * 64 * 112 * 112 * 3 * 49}",
      (rand(8, 3, 224, 224), rand(64, 3, 7, 7)),
      lambda x, k: torch.nn.functional.conv2d(x, k, padding=3, stride=2))
timed("sort f32 1M", 5, f"bytes={8 * 1024 * 1024}", (rand(1024 * 1024),), torch.sort)
timed("gather f32 16M of 64M", 10, f"bytes={12 * 16 * 1024 * 1024}",
      (rand(M64), torch.arange(16 * 1024 * 1024, device=dev) * 4), lambda x, i: x[i])
