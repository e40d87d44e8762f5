"""The MNIST MLP training step of examples/mnist_mlp_step_bench.exs in PyTorch (eager, CUDA and
CPU) and JAX (jit), timed the same way: best and median of 5 blocks of 20 steps, the loss read
back to the host every step. Same model: batch 32, 784-128-10 (or --batch/--hidden, e.g. the
kernel-bound variant --batch 512 --hidden 2048), relu, log-softmax cross-entropy against one-hot
labels, mean; value and gradients w.r.t. the four parameters.

    python3 bench/peers_mnist_step.py [--batch B] [--hidden H]
"""
import argparse
import statistics
import time

import numpy as np

parser = argparse.ArgumentParser()
parser.add_argument("--batch", type=int, default=32)
parser.add_argument("--hidden", type=int, default=128)
args = parser.parse_args()
B, H = args.batch, args.hidden
BLOCKS, STEPS = 5, 20
rng = np.random.default_rng(42)
w1 = (rng.uniform(-1, 1, (784, H)) * np.sqrt(6 / (784 + H))).astype(np.float32)
w2 = (rng.uniform(-1, 1, (H, 10)) * np.sqrt(6 / (H + 10))).astype(np.float32)
b1 = np.full((H,), 0.01, np.float32)
b2 = np.zeros((10,), np.float32)
x = rng.uniform(0, 1, (B, 1, 28, 28)).astype(np.float32)
labels = np.eye(10, dtype=np.float32)[np.arange(B) % 10]


WARM_UP_S = 0.5


def timed(step):
    # Steps for WARM_UP_S first, as examples/mnist_mlp_step_bench.exs does: an idle GPU runs at a
    # low clock until a burst of work raises it (the H200: 345 MHz idle, 1980 under load).
    deadline = time.perf_counter() + WARM_UP_S
    while time.perf_counter() < deadline:
        step()
    per_step = []
    for _ in range(BLOCKS):
        t0 = time.perf_counter()
        for _ in range(STEPS):
            step()
        per_step.append((time.perf_counter() - t0) * 1000 / STEPS)
    return min(per_step), statistics.median(per_step)


rows = []
try:
    import torch

    def torch_mode(device):
        params = [torch.tensor(a, device=device, requires_grad=True) for a in (w1, b1, w2, b2)]
        xt, lt = torch.tensor(x, device=device), torch.tensor(labels, device=device)

        def step():
            p1, q1, p2, q2 = params
            for p in params:
                p.grad = None
            h = torch.relu(xt.reshape(B, -1) @ p1 + q1)
            logits = h @ p2 + q2
            loss = -(lt * torch.log_softmax(logits, dim=1)).sum(dim=1).mean()
            loss.backward()
            return loss.item()

        for _ in range(10):
            step()
        return timed(step)

    if torch.cuda.is_available():
        rows.append(("PyTorch eager, CUDA (" + torch.cuda.get_device_name(0) + ")", *torch_mode("cuda")))
    rows.append((f"PyTorch eager, CPU ({torch.get_num_threads()} threads)", *torch_mode("cpu")))
except ImportError as e:
    print("PyTorch not available:", e)

try:
    import jax
    import jax.numpy as jnp

    def loss_fn(params, xb, lb):
        p1, q1, p2, q2 = params
        h = jax.nn.relu(xb.reshape(B, -1) @ p1 + q1)
        logits = h @ p2 + q2
        return -jnp.mean(jnp.sum(lb * jax.nn.log_softmax(logits, axis=1), axis=1))

    vg = jax.jit(jax.value_and_grad(loss_fn))
    params = tuple(jnp.asarray(a) for a in (w1, b1, w2, b2))
    xj, lj = jnp.asarray(x), jnp.asarray(labels)

    def jax_step():
        loss, grads = vg(params, xj, lj)
        return float(loss)

    for _ in range(10):
        jax_step()
    rows.append((f"JAX jit ({jax.devices()[0].device_kind})", *timed(jax_step)))
except ImportError as e:
    print("JAX not available:", e)

print(f"\nMNIST MLP step, batch {B}, 784-{H}-10\n| peer | best ms/step | median ms/step |\n|---|---|---|")
for name, best, median in rows:
    print(f"| {name} | {best:.3f} | {median:.3f} |")
