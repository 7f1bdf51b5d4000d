"""Steps per second of batchppo's simulation paths, side by side, with ratios.

(a) gymnax Pendulum-v1 fused: ``jit(rollout)`` over ``GymnaxEnv`` with a small MLP policy.
(b) Host Pendulum-v1 envs (``batchppo.envs`` BatchEnv, ``process`` and ``sync`` backends):
    * in-graph: ``jit(rollout)`` over ``HostEnv`` (one ``io_callback`` per step inside
      ``lax.scan``), the same MLP policy;
    * HostLoop: the trainer's ``host_loop`` driver, a Python loop around the compiled policy
      step and the compiled bookkeeping of ``simulate`` (two calls per step);
    * plain loop: a Python loop calling the jitted policy, then ``step_arrays``, per step;
    * envs alone: ``step_arrays`` with pre-drawn random actions, no policy at all.

Usage (full figures; smoke test with e.g. ``--gymnax-envs 64 --host-envs 4 --seconds 0.5``):

    JAX_PLATFORMS=cpu python bench/simulate.py --gymnax-envs 2048 --host-envs 32 --seconds 5
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jnp
import numpy as np
from harness import Side, compare, run_for, write_json

from batchppo.backends import GymnaxEnv, HostEnv
from batchppo.backends.host_loop import HostLoop
from batchppo.core.simulation import init_sim_state, rollout


def mlp_params(key: jax.Array, obs_size: int, act_size: int, hidden: int) -> list:
    """Weights of a 2-hidden-layer tanh MLP."""
    sizes = [obs_size, hidden, hidden, act_size]
    keys = jax.random.split(key, len(sizes) - 1)
    return [
        (jax.random.normal(k, (a, b)) / np.sqrt(a), jnp.zeros(b))
        for k, a, b in zip(keys, sizes[:-1], sizes[1:], strict=True)
    ]


def mlp_policy(params, carry, obs, first, key):
    """Gaussian MLP policy (mean from the MLP, unit noise), a PolicyFn."""
    x = obs
    for w, b in params[:-1]:
        x = jnp.tanh(x @ w + b)
    w, b = params[-1]
    mean = x @ w + b
    action = mean + 0.3 * jax.random.normal(key, mean.shape)
    return action, {}, carry


def best_rates(fns: dict[str, Callable[[], int]], seconds: float, rounds: int) -> dict[str, float]:
    """Steps/s of each ``fn`` (returning env steps done), the best of ``rounds`` interleaved runs
    of ``seconds / rounds`` each, after two untimed calls of each (compilation and first resets;
    a rollout's second call compiles again, for the state its first returned).

    Interleaving and keeping the best run makes the ratios robust to load from other processes
    (the figures are upper bounds of what each path reaches on this machine).
    """
    sides = [
        Side(name, lambda _, fn=fn: run_for(fn, seconds / rounds).rate) for name, fn in fns.items()
    ]
    result = compare(sides, rounds, warmup=2)
    return {name: result.best(name) for name in fns}


def rollout_fn(env, params, num_steps: int) -> Callable[[], int]:
    """One call of ``jit(rollout)`` over ``env``, continuing the sim state between calls."""
    run = jax.jit(rollout, static_argnums=(0, 1, 4))
    state = [init_sim_state(env, (), jax.random.key(0))]

    def once() -> int:
        state[0], traj, _ = run(env, mlp_policy, params, state[0], num_steps)
        jax.block_until_ready(traj.reward)
        return num_steps * env.num_envs

    return once


def host_loop_fn(env, params, num_steps: int) -> Callable[[], int]:
    """``HostLoop.rollout`` (the trainer's ``host_loop`` driver) over ``env``."""
    loop = HostLoop(env, mlp_policy)
    state = [init_sim_state(env, (), jax.random.key(0))]

    def once() -> int:
        state[0], traj, _ = loop.rollout(params, state[0], num_steps)
        jax.block_until_ready(traj.reward)
        return num_steps * env.num_envs

    return once


def plain_loop_fn(vec, params, num_steps: int) -> Callable[[], int]:
    """A Python loop of ``num_steps``: jitted policy on the host obs, then ``step_arrays``."""
    policy = jax.jit(mlp_policy)
    obs = [vec.reset(seed=0)[0]]
    key = [jax.random.key(0)]

    def once() -> int:
        for _ in range(num_steps):
            key[0], sub = jax.random.split(key[0])
            action, _, _ = policy(params, (), obs[0], None, sub)
            obs[0], *_ = vec.step_arrays(np.asarray(action))
        return num_steps * vec.num_envs

    return once


def envs_alone_fn(vec, num_steps: int) -> Callable[[], int]:
    """``num_steps`` calls of ``step_arrays`` with pre-drawn random actions."""
    rng = np.random.default_rng(0)
    shape = (num_steps, vec.num_envs, *vec.single_action_space.shape)
    actions = rng.uniform(-1, 1, shape).astype(np.float32)

    def once() -> int:
        for a in actions:
            vec.step_arrays(a)
        return num_steps * vec.num_envs

    return once


def main(argv: list[str] | None = None) -> None:
    """Runs the benchmark and prints each path's steps/s and the ratios."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gymnax-envs", type=int, default=2048)
    parser.add_argument("--gymnax-steps", type=int, default=200, help="steps per rollout call")
    parser.add_argument("--host-envs", type=int, default=32)
    parser.add_argument("--host-steps", type=int, default=200, help="steps per rollout call")
    parser.add_argument("--workers", type=int, default=None, help="process backend workers")
    parser.add_argument("--hidden", type=int, default=64, help="policy MLP width")
    parser.add_argument("--seconds", type=float, default=6.0, help="timing per measurement")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (best kept)")
    parser.add_argument("--backends", default="process,sync", help="host backends to run")
    parser.add_argument("--skip-gymnax", action="store_true")
    parser.add_argument(
        "--json",
        default="",
        help="also write {row: steps/s} to this file, beside the run's date, command, commit "
        "and machine",
    )
    args = parser.parse_args(argv)

    print(f"jax {jax.__version__} on {jax.devices()[0].platform}, {os.cpu_count()} cpus")
    params = mlp_params(jax.random.key(1), 3, 1, args.hidden)
    rows: list[tuple[str, float]] = []

    if not args.skip_gymnax:
        env = GymnaxEnv("Pendulum-v1", args.gymnax_envs)
        fns = {"fused": rollout_fn(env, params, args.gymnax_steps)}
        rate = best_rates(fns, args.seconds, args.rounds)["fused"]
        rows.append((f"(a) gymnax Pendulum fused, {args.gymnax_envs} envs", rate))
        print(f"{rows[-1][0]:<58} {rate:>14,.0f} steps/s", flush=True)

    from batchppo import envs as host_envs

    for backend in [b for b in args.backends.split(",") if b]:
        options = host_envs.WorkerOptions(num_workers=args.workers)
        vec = host_envs.make(
            "Pendulum-v1",
            args.host_envs,
            seed=0,
            backend=backend,
            options=options if backend == "process" else None,
        )
        try:
            label = f"{backend} BatchEnv, {args.host_envs} envs"
            fns = {
                "graph": rollout_fn(HostEnv(vec), params, args.host_steps),
                "host_loop": host_loop_fn(HostEnv(vec), params, args.host_steps),
                "loop": plain_loop_fn(vec, params, args.host_steps),
                "alone": envs_alone_fn(vec, args.host_steps),
            }
            rates = best_rates(fns, args.seconds, args.rounds)
            graph, host_loop, loop = rates["graph"], rates["host_loop"], rates["loop"]
            alone = rates["alone"]
        finally:
            vec.close()
        for name, rate in (
            ("in-graph HostEnv", graph),
            ("HostLoop (trainer's host_loop)", host_loop),
            ("plain loop", loop),
            ("envs alone", alone),
        ):
            rows.append((f"(b) {label}: {name}", rate))
            print(f"{rows[-1][0]:<58} {rate:>14,.0f} steps/s", flush=True)
        print(
            f"    {backend}: in-graph / plain loop = {graph / loop:.2f}x, "
            f"in-graph / HostLoop = {graph / host_loop:.2f}x, "
            f"in-graph / envs alone = {graph / alone:.2f} (target >= 0.70)",
            flush=True,
        )
    if args.json:
        write_json(args.json, dict(rows))


if __name__ == "__main__":
    main()
