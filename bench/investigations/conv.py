"""A Nature-CNN gradient step on the CPU: JAX with XLA's defaults, JAX with convolutions kept
on XLA's own kernels (``xla_convolutions``), and PyTorch, side by side in one run.

The step is what PPO's Atari update does per minibatch: the Nature CNN (Mnih et al. 2015:
32 8x8/4, 64 4x4/2, 64 3x3/1, 512 dense) and a linear head over ``--batch`` uint8 frame
stacks (4 x 84 x 84) scaled by 1/255, a squared-output loss, its gradient and an Adam step.
Each side compiles (or warms up) once, then ``--steps`` steps are timed, ``--rounds`` times
in alternating order; the best round counts. Torch runs with one thread per core.
``--bf16`` adds both libraries' steps in bfloat16 (JAX: the layers compute in bfloat16 over
float32 parameters; torch: ``autocast``), for CPUs with bfloat16 instructions.

Examples:
    python bench/investigations/conv.py                      # batch 256, 16 steps, 3 rounds
    python bench/investigations/conv.py --batch 64 --steps 4 --rounds 1      # smoke test
    python bench/investigations/conv.py --bf16                              # and the bfloat16 sides
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

import numpy as np

LAYERS = ((32, 8, 4), (64, 4, 2), (64, 3, 1))
"""The Nature CNN's convolutions: (features, kernel size, stride)."""
ACTIONS = 4


def jax_step(frames: np.ndarray, xla_convolutions: bool, bf16: bool = False) -> Callable[[], None]:
    """One compiled JAX gradient step over ``frames``, with the trainer's hot XLA options
    (the layers in bfloat16 if ``bf16``)."""
    import flax.linen as nn
    import jax
    import jax.numpy as jnp
    import optax

    from batchppo.algorithms.training.programs import hot_compiler_options

    dtype = jnp.bfloat16 if bf16 else jnp.float32

    class Nature(nn.Module):
        @nn.compact
        def __call__(self, x: jax.Array) -> jax.Array:
            x = jnp.transpose(x.astype(dtype) / 255.0, (0, 2, 3, 1))
            for features, size, stride in LAYERS:
                conv = nn.Conv(features, (size, size), (stride, stride), "VALID", dtype=dtype)
                x = nn.relu(conv(x))
            x = nn.relu(nn.Dense(512, dtype=dtype)(x.reshape(x.shape[0], -1)))
            return nn.Dense(ACTIONS)(x).astype(jnp.float32)

    model, optimizer = Nature(), optax.adam(2.5e-4)
    x = jnp.asarray(frames)
    params = model.init(jax.random.key(0), x[:1])
    state = [params, optimizer.init(params)]

    def step(params, opt_state, x):
        grads = jax.grad(lambda p: jnp.sum(model.apply(p, x) ** 2))(params)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state

    compiled = jax.jit(step, compiler_options=hot_compiler_options(xla_convolutions))

    def run() -> None:
        state[:] = compiled(*state, x)
        jax.block_until_ready(state)

    return run


def torch_step(frames: np.ndarray, bf16: bool = False) -> Callable[[], None]:
    """The same step in PyTorch (CleanRL's layers), one thread per core (under bfloat16
    ``autocast`` if ``bf16``)."""
    import torch

    torch.set_num_threads(os.cpu_count() or 1)
    layers: list[torch.nn.Module] = []
    channels = frames.shape[1]
    for features, size, stride in LAYERS:
        layers += [torch.nn.Conv2d(channels, features, size, stride), torch.nn.ReLU()]
        channels = features
    model = torch.nn.Sequential(
        *layers, torch.nn.Flatten(), torch.nn.Linear(64 * 7 * 7, 512), torch.nn.ReLU(),
        torch.nn.Linear(512, ACTIONS),
    )  # fmt: skip
    optimizer = torch.optim.Adam(model.parameters(), lr=2.5e-4)
    x = torch.from_numpy(frames.copy())

    def run() -> None:
        optimizer.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            out = model(x.float() / 255.0)
        (out.float() ** 2).sum().backward()
        optimizer.step()

    return run


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--batch", type=int, default=256, help="frame stacks per step")
    parser.add_argument("--steps", type=int, default=16, help="timed steps per round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, alternating the order")
    parser.add_argument("--bf16", action="store_true", help="add both libraries' bfloat16 steps")
    args = parser.parse_args()
    frames = np.random.default_rng(0).integers(0, 256, (args.batch, 4, 84, 84), np.uint8)
    sides = {
        "jax, XLA's defaults": jax_step(frames, xla_convolutions=False),
        "jax, xla_convolutions": jax_step(frames, xla_convolutions=True),
        "torch": torch_step(frames),
    }
    if args.bf16:
        sides["jax bf16, xla_convolutions"] = jax_step(frames, xla_convolutions=True, bf16=True)
        sides["torch bf16"] = torch_step(frames, bf16=True)
    for run in sides.values():
        run()  # compile / warm up
    best = {name: float("inf") for name in sides}
    names = list(sides)
    for k in range(args.rounds):
        for name in names if k % 2 == 0 else names[::-1]:
            start = time.perf_counter()
            for _ in range(args.steps):
                sides[name]()
            best[name] = min(best[name], (time.perf_counter() - start) / args.steps)
    print(
        f"bench/investigations/conv.py: batch {args.batch}, {os.cpu_count()} cores, "
        f"best of {args.rounds}"
    )
    for name, seconds in best.items():
        print(f"{name}: {1000 * seconds:.0f} ms per gradient step")
    base, ours, torch = (best[name] for name in names[:3])
    print(f"ratio XLA's defaults / xla_convolutions = {base / ours:.2f}")
    print(f"ratio xla_convolutions / torch = {ours / torch:.2f}")
    if args.bf16:
        ours_bf16, torch_bf16 = best["jax bf16, xla_convolutions"], best["torch bf16"]
        print(f"ratio jax bf16 / jax float32 (xla_convolutions) = {ours_bf16 / ours:.2f}")
        print(f"ratio torch bf16 / torch float32 = {torch_bf16 / torch:.2f}")
        print(f"ratio jax bf16 / torch bf16 = {ours_bf16 / torch_bf16:.2f}")


if __name__ == "__main__":
    main()
