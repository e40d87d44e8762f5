"""bench/dynamic_slice_loop.exs's loop in JAX (jit, lax.while_loop with dynamic_slice and
dynamic_update_slice, which clamp their starts as Nx does) and PyTorch eager CUDA (starts kept
on the device: the slice and the put as gathers and an index_put_ of clamped index tensors, no
host read per iteration). Microseconds per iteration, best of 3 runs of N iterations, each run
ending with the result on the host; the final 40x40 sums printed so runs can be compared (1000
iterations: 802454.0, 10000: 802234.0, computed in plain Python).

    python3 bench/peers_dynamic_slice_loop.py [N]
"""
import sys
import time

import numpy as np

N = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
t_host = np.arange(32 * 32, dtype=np.float32).reshape(32, 32)
acc_host = np.zeros((40, 40), np.float32)


def best_of(run):
    times, result = [], None
    for _ in range(3):
        start = time.perf_counter()
        result = run()
        times.append((time.perf_counter() - start) * 1e6 / N)
    return min(times), result


try:
    import jax
    import jax.numpy as jnp
    from jax import lax

    def body(state):
        t, acc, i, n = state
        row = jnp.remainder(i * 5, 37) - 2
        col = jnp.remainder(i * 3, 29)
        # JAX wraps negative starts (Python indexing); Nx clamps them to 0.
        piece = lax.dynamic_slice(t, (jnp.maximum(row, 0), col), (4, 8))
        acc = lax.dynamic_update_slice(acc, piece + 1.0, (jnp.maximum(row + 1, 0), col))
        return t, acc, i + 1, n

    @jax.jit
    def loop(t, acc, n):
        return lax.while_loop(lambda s: s[2] < s[3], body, (t, acc, jnp.int32(0), n))[1]

    t, acc = jnp.asarray(t_host), jnp.asarray(acc_host)
    np.asarray(loop(t, acc, jnp.int32(N)))
    us, result = best_of(lambda: np.asarray(loop(t, acc, jnp.int32(N))))
    print(f"| JAX jit while_loop ({jax.devices()[0].device_kind}) | {us:.2f} | sum {result.sum():.1f} |")
except Exception as e:  # noqa: BLE001
    print(f"| JAX | n/a ({type(e).__name__}: {e}) | |")

try:
    import torch

    dev = "cuda"
    t, acc0 = torch.tensor(t_host, device=dev), torch.tensor(acc_host, device=dev)
    ar4, ar8 = torch.arange(4, device=dev), torch.arange(8, device=dev)

    def run():
        acc = acc0.clone()
        i = torch.zeros((), dtype=torch.int64, device=dev)
        for _ in range(N):
            row = torch.remainder(i * 5, 37) - 2
            col = torch.remainder(i * 3, 29)
            r, c = torch.clamp(row, 0, 28), torch.clamp(col, 0, 24)
            piece = t[(r + ar4)[:, None], (c + ar8)[None, :]]
            r2, c2 = torch.clamp(row + 1, 0, 36), torch.clamp(col, 0, 32)
            acc.index_put_(((r2 + ar4)[:, None], (c2 + ar8)[None, :]), piece + 1.0)
            i = i + 1
        return acc.cpu().numpy()

    run()
    us, result = best_of(run)
    print(f"| PyTorch eager CUDA ({torch.cuda.get_device_name()}) | {us:.2f} | sum {result.sum():.1f} |")
except Exception as e:  # noqa: BLE001
    print(f"| PyTorch | n/a ({type(e).__name__}: {e}) | |")
