"""Which forms of a host env step inside a compiled loop does XLA compile (issue 41, item 4)?

On an H200 (jaxlib 0.11.2, CUDA 13) the ``breakout_atari`` rollout with the host env's
``io_callback`` inside the compiled iteration died while compiling (``shape_util.cc:757 Check
failed: shape.IsArray() || shape.IsTuple()``, benchmarks journal 8c). This script is the minimal
program of that form, and its variants, each compiled and run in a process of its own (an
abort kills only that process): a fake Atari step on the host (NumPy: eight 84x84x4 uint8
frames, rewards, terminated, truncated and the final frames, as ``HostEnv.host_step``
returns) called from a ``lax.scan`` of ``--steps`` steps whose carry holds the frames, behind
a tiny policy, under ``jax.jit``. A variant that aborts on a device and one of its neighbours
that does not are the reproduction to report upstream and the form to use.

Variants (``--variants``, default all):

* ``ordered``: ``io_callback(..., ordered=True)`` returning the 5-tuple (HostEnv's form);
* ``unordered``: the same with ``ordered=False``;
* ``single``: ordered, one flat uint8 array holding everything (unpacked in the graph);
* ``float``: ordered, the frames as float32 instead of uint8;
* ``while``: ordered, in a ``lax.fori_loop`` instead of a ``lax.scan`` (no stacked outputs);
* ``pure``: ``jax.pure_callback`` (no ordering; the env's order is then not guaranteed).

Every form above compiled on an H200 where the ``breakout_atari`` iteration still aborted, in
XLA's ``PriorityFusion`` cost analysis (benchmarks journal 11e). The next forms add, to ``ordered``,
one by one what that iteration holds around its callback, to find which brings the abort:

* ``frames``: the rollout stacks every step's frames and final frames (``u8[T, 8, 84, 84, 4]``
  twice, as the rollout's transitions do);
* ``cond``: ``frames``, then a ``lax.cond`` on "any episode truncated" that reads the stacked
  final frames (the bootstrap of truncated episodes);
* ``cnn``: ``frames`` with a convolutional policy on the frames;
* ``update``: ``cnn``, then a gradient step of a loss over the stacked frames;
* ``preset``: all of these at once;
* ``preset_unordered``: ``preset`` with ``ordered=False`` (no token in the program; the calls
  then follow each other only through their data).

    python bench/investigations/callback_repro.py           # every variant, on JAX's default device
    python bench/investigations/callback_repro.py --variants ordered --steps 4 --json out.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

# bench/ on the path, as for a script run from there: the harness lives beside the stable suite.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from harness import spawn, write_json  # bench/harness.py: own processes, results with provenance

# What each bisecting form adds to ``ordered`` (see the docstring).
FEATURES = {
    "frames": {"frames"},
    "cond": {"frames", "cond"},
    "cnn": {"frames", "cnn"},
    "update": {"frames", "cnn", "update"},
    "preset": {"frames", "cond", "cnn", "update"},
    "preset_unordered": {"frames", "cond", "cnn", "update", "unordered"},
}
VARIANTS = ("ordered", "unordered", "single", "float", "while", "pure", *FEATURES)
NUM_ENVS, FRAME = 8, (84, 84, 4)


def _host_step(frame_dtype: Any):
    """A fake batched Atari step on the host: ``action -> (obs, reward, term, trunc, final)``."""
    import numpy as np

    counter = [0]

    def step(action: np.ndarray) -> tuple[np.ndarray, ...]:
        counter[0] += 1
        obs = np.full((NUM_ENVS, *FRAME), counter[0] % 255, frame_dtype)
        reward = (np.asarray(action) % 2).astype(np.float32)
        done = np.zeros(NUM_ENVS, np.bool_)
        done[counter[0] % NUM_ENVS] = counter[0] % 7 == 0
        return obs, reward, done, np.zeros(NUM_ENVS, np.bool_), obs.copy()

    return step


def program(variant: str, steps: int):
    """``(jitted function, its argument)`` of ``variant``: a rollout of ``steps`` host steps."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.experimental import io_callback

    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; choose from {', '.join(VARIANTS)}")
    frame_dtype = np.float32 if variant == "float" else np.uint8
    host = _host_step(frame_dtype)
    frames = jax.ShapeDtypeStruct((NUM_ENVS, *FRAME), frame_dtype)
    flags = jax.ShapeDtypeStruct((NUM_ENVS,), np.bool_)
    structs = (frames, jax.ShapeDtypeStruct((NUM_ENVS,), np.float32), flags, flags, frames)
    size = int(np.prod(FRAME))
    features = FEATURES.get(variant, set())

    def call(action: jax.Array) -> tuple[jax.Array, ...]:
        if variant == "single":  # everything as one flat uint8 array, unpacked in the graph

            def packed(a: np.ndarray) -> np.ndarray:
                obs, reward, term, trunc, final = host(a)
                parts = [obs.reshape(NUM_ENVS, -1), final.reshape(NUM_ENVS, -1)]
                parts += [reward.astype(np.uint8)[:, None], term[:, None], trunc[:, None]]
                return np.concatenate([p.astype(np.uint8) for p in parts], axis=1)

            flat = io_callback(packed, jax.ShapeDtypeStruct((NUM_ENVS, 2 * size + 3), np.uint8),
                               action, ordered=True)  # fmt: skip
            obs, final = flat[:, :size].reshape(frames.shape), flat[:, size : 2 * size]
            reward = flat[:, 2 * size].astype(jnp.float32)
            term, trunc = flat[:, 2 * size + 1] > 0, flat[:, 2 * size + 2] > 0
            return obs, reward, term, trunc, final.reshape(frames.shape)
        if variant == "pure":
            return jax.pure_callback(host, structs, action)
        unordered = variant == "unordered" or "unordered" in features
        return io_callback(host, structs, action, ordered=not unordered)

    def logits(w: dict[str, jax.Array], obs: jax.Array) -> jax.Array:
        x = obs.astype(jnp.float32)
        if "cnn" in features:  # one strided convolution, as the Nature CNN's first layer
            x = jax.lax.conv_general_dilated(
                x / 255.0, w["conv"], (4, 4), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC")
            )
            x = jax.nn.relu(x)
        return x.mean(axis=(1, 2)) @ w["head"]  # (envs, 4)

    def policy(w: dict[str, jax.Array], obs: jax.Array) -> jax.Array:
        return jnp.argmax(logits(w, obs), axis=-1).astype(jnp.int32)

    def body(carry: tuple, _: Any) -> tuple[tuple, tuple]:
        w, obs, total = carry
        next_obs, reward, term, trunc, final = call(policy(w, obs))
        done = term | trunc
        out = (reward, done, final[:, 0, 0, 0])
        if "frames" in features:
            out = (reward, done, trunc, obs, final)
        return (w, next_obs, total + reward.sum()), out

    def rollout(w: dict[str, jax.Array]) -> tuple:
        start = (w, jnp.zeros(frames.shape, frame_dtype), jnp.float32(0))
        if variant == "while":
            return jax.lax.fori_loop(0, steps, lambda i, c: body(c, None)[0], start)[2]
        carry, outs = jax.lax.scan(body, start, None, length=steps)
        if "cond" in features:  # a value of the final frames where an episode was truncated
            trunc, final = outs[2], outs[4]
            boot = jax.lax.cond(
                trunc.any(),
                lambda f: f.astype(jnp.float32).mean(axis=(2, 3, 4)),
                lambda f: jnp.zeros(f.shape[:2], jnp.float32),
                final,
            )
            outs = (*outs, boot)
        if "update" in features:  # one gradient step over the stacked frames
            stacked = outs[3].reshape(-1, *FRAME)

            def loss(w: dict[str, jax.Array]) -> jax.Array:
                return jnp.mean(jax.nn.log_softmax(logits(w, stacked)) ** 2)

            w = jax.tree.map(lambda p, g: p - 1e-3 * g, w, jax.grad(loss)(w))
            return carry[2], outs, w
        return carry[2], outs

    def weights(*shape: int) -> jax.Array:  # distinct values, so that the gradient is not 0
        return jnp.linspace(-1.0, 1.0, int(np.prod(shape)), dtype=jnp.float32).reshape(shape)

    w = {"head": weights(16 if "cnn" in features else FRAME[-1], 4)}
    if "cnn" in features:
        w["conv"] = weights(8, 8, FRAME[-1], 16) / 64
    return jax.jit(rollout), w


def worker(variant: str, steps: int) -> dict[str, Any]:
    """Compiles and runs ``variant`` twice; its times and the device."""
    import jax

    fn, arg = program(variant, steps)
    start = time.perf_counter()
    compiled = fn.lower(arg).compile()
    compile_s = time.perf_counter() - start
    runs = []
    for _ in range(2):
        start = time.perf_counter()
        jax.block_until_ready(compiled(arg))
        runs.append(time.perf_counter() - start)
    return {
        "device": str(jax.devices()[0]),
        "jax": jax.__version__,
        "compile_s": compile_s,
        "step_ms": 1e3 * min(runs) / steps,
    }


def run_variant(variant: str, steps: int, timeout: float) -> dict[str, Any]:
    """``worker`` in its own process: its result, or how the process ended."""
    result = spawn(__file__, ["--worker", variant, "--steps", str(steps)], timeout)
    return {"variant": variant, "ok": "error" not in result, **result}


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated")
    parser.add_argument("--steps", type=int, default=128, help="host steps in the loop")
    parser.add_argument("--timeout", type=float, default=300, help="per variant (s)")
    parser.add_argument("--json", help="also write the results (and their provenance) to this file")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.worker, args.steps)), flush=True)
        return []
    variants = args.variants.split(",")
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown:
        parser.error(f"unknown variants {unknown}; choose from {', '.join(VARIANTS)}")
    results = []
    for variant in variants:
        result = run_variant(variant, args.steps, args.timeout)
        shown = (
            f"compiles ({result['compile_s']:.1f} s), {result['step_ms']:.3f} ms a step, "
            f"{result['device']}"
            if result["ok"]
            else f"FAILS, {result['error']}"
        )
        print(f"{variant:>16}: {shown}", flush=True)
        results.append(result)
    if args.json:
        write_json(args.json, {"steps": args.steps, "results": results}, argv)
    return results


if __name__ == "__main__":
    main()
