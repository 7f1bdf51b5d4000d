r"""Minibatch permutations, ``index`` against ``sort`` (``minibatch_shuffle``), side by side.

Two parts, both in this one process:

* ``--sizes``: one permutation of n indices by each method, in a compiled loop of ``--reps``
  draws, microseconds a draw and the ratio sort / index.
* ``--presets``: the fused presets' whole runs (``make_train`` for ``--iterations``
  iterations) with either method, compiled apart and then called alternately ``--rounds``
  times; median steps/s by wall clock and by CPU time, and the ratio index / sort.
* ``--learning``: the fused presets trained to their full ``steps`` with either method, the
  seeds of ``--seeds`` in one program (``jax.vmap`` of ``make_train`` over ``key(seed)``);
  per seed the mean return of the training episodes that ended in the last tenth of the
  iterations (``final_returns``), and over the seeds the IQM and mean with 95 %
  stratified-bootstrap intervals.

Both compile ``make_train`` with ``COMPILER_OPTIONS``, the XLA options of the package's
training iterations of an MLP preset (a CNN preset's trainer adds XLA's own convolutions on
the CPU, which these programs do not).

``--set KEY=VALUE`` (repeatable, as ``batchppo train --set``) changes a field of every preset
run of ``--presets`` and ``--learning``; the JSON lists them (``sets``).

Usage::

    JAX_PLATFORMS=cpu python bench/investigations/shuffle.py \
        --presets cartpole_jax,pendulum_jax --json out.json
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from batchppo.algorithms.ppo import make_train
from batchppo.algorithms.ppo.config import PPOConfig
from batchppo.algorithms.ppo.ppo import rollout_length
from batchppo.algorithms.ppo.presets import PRESETS
from batchppo.algorithms.training import shuffle
from batchppo.algorithms.training.programs import COMPILER_OPTIONS
from batchppo.experiment.analysis import stats
from batchppo.experiment.config.configs import apply_overrides

# bench/ on the path, as for a script run from there: the harness lives beside the stable suite.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from harness import write_json  # bench/harness.py: the result beside its provenance


def permutation_us(method: str, n: int, reps: int) -> float:
    """Microseconds a permutation of ``n`` by ``method``: ``reps`` draws in one compiled loop,
    each summed so that none is left out of the program."""

    def body(i: jax.Array, acc: jax.Array) -> jax.Array:
        return acc + shuffle.permutation(jax.random.fold_in(key, i), n, method).sum()

    key = jax.random.key(0)
    loop = jax.jit(lambda k: lax.fori_loop(0, reps, body, jnp.zeros((), jnp.int32)))
    loop(key).block_until_ready()
    t = time.perf_counter()
    loop(key).block_until_ready()
    return (time.perf_counter() - t) / reps * 1e6


def preset_rates(
    name: str, iterations: int, rounds: int, sets: list[str] | None = None
) -> dict[str, Any]:
    """``name``'s fused run (with the ``KEY=VALUE`` overrides ``sets``) with each method:
    steps/s (wall, CPU) medians and the ratios."""
    base = apply_overrides(PRESETS[name], sets or [])
    steps = iterations * rollout_length(base) * base.num_agents
    programs = {}
    for method in shuffle.SHUFFLES:
        config: PPOConfig = dataclasses.replace(base, steps=steps, minibatch_shuffle=method)
        key = jax.random.key(config.seed)
        program = jax.jit(make_train(config), compiler_options=COMPILER_OPTIONS)
        programs[method] = program.lower(key).compile()
        jax.block_until_ready(programs[method](key))
    wall: dict[str, list[float]] = {m: [] for m in programs}
    cpu: dict[str, list[float]] = {m: [] for m in programs}
    for round_ in range(rounds):
        for method, program in programs.items():
            key = jax.random.key(round_)
            t, c = time.perf_counter(), time.process_time()
            jax.block_until_ready(program(key))
            wall[method].append(time.perf_counter() - t)
            cpu[method].append(time.process_time() - c)
    out: dict[str, Any] = {"steps": steps, "batch": rollout_length(base) * base.num_agents}
    for method in programs:
        out[method] = {
            "sps": steps / statistics.median(wall[method]),
            "cpu_sps": steps / statistics.median(cpu[method]),
        }
    out["ratio"] = out["index"]["sps"] / out["sort"]["sps"]
    out["cpu_ratio"] = out["index"]["cpu_sps"] / out["sort"]["cpu_sps"]
    return out


def learning(
    name: str, seeds: list[int], steps: int | None = None, sets: list[str] | None = None
) -> dict[str, Any]:
    """``name`` (with the ``KEY=VALUE`` overrides ``sets``) trained with each method over
    ``seeds`` (for ``steps``, or the preset's): the per-seed final training return and its IQM
    and mean over the seeds, each with its 95 % bootstrap interval."""
    base = apply_overrides(PRESETS[name], sets or [])
    if steps:
        base = dataclasses.replace(base, steps=steps)
    keys = jax.vmap(jax.random.key)(jnp.asarray(seeds))
    out: dict[str, Any] = {"seeds": seeds, "steps": base.steps}
    for method in shuffle.SHUFFLES:
        config = dataclasses.replace(base, minibatch_shuffle=method)
        program = jax.jit(jax.vmap(make_train(config)), compiler_options=COMPILER_OPTIONS)
        _, metrics = program(keys)
        finals = final_returns(np.asarray(metrics["score"]), np.asarray(metrics["episodes"]))
        aggregates = stats.aggregate_intervals({name: finals}, normalized=False)
        row: dict[str, Any] = {"final": finals.tolist()}
        for stat in ("iqm", "mean"):
            row[stat] = [aggregates[stat][k] for k in ("value", "low", "high")]
        out[method] = row
    return out


def final_returns(score: np.ndarray, episodes: np.ndarray) -> np.ndarray:
    """Per seed, the mean return of the episodes that ended in the last tenth of the
    iterations, or in the last fifth, quarter, ... where some seed had none there (envs of
    equal episode lengths end together, every few iterations).

    Args:
        score: ``(seeds, iterations)`` mean return of each iteration's ended episodes (nan
            where none ended).
        episodes: ``(seeds, iterations)`` how many ended.
    """
    iterations = score.shape[1]
    for parts in (10, 5, 4, 3, 2, 1):
        tail = max(iterations // parts, 1)
        count = episodes[:, -tail:].sum(axis=1)
        if (count > 0).all():
            total = np.where(episodes[:, -tail:] > 0, score[:, -tail:] * episodes[:, -tail:], 0)
            return total.sum(axis=1) / count
    raise ValueError("a seed ended no episode in the whole run")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default="512,8192,65536", help="comma list of n, or none")
    p.add_argument("--reps", type=int, default=50, help="draws per size and method")
    p.add_argument("--presets", default="none", help="comma list of fused presets, or none")
    p.add_argument("--iterations", type=int, default=32, help="iterations of a preset's run")
    p.add_argument("--rounds", type=int, default=5, help="alternating calls of each program")
    p.add_argument("--learning", default="none", help="comma list of fused presets, or none")
    p.add_argument("--seeds", default="10-19", help="seeds of --learning: first-last")
    p.add_argument("--learning-steps", type=int, default=0, help="0: each preset's steps")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a config field of every preset run (repeatable), e.g. --set update_epochs=1",
    )
    p.add_argument("--json", help="write the results here")
    args = p.parse_args(argv)
    results: dict[str, Any] = {
        "backend": jax.default_backend(),
        "jax": jax.__version__,
        "sizes": {},
        "presets": {},
        "sets": args.set,
    }
    for n in [int(x) for x in args.sizes.split(",") if x not in ("", "none")]:
        row = {m: permutation_us(m, n, args.reps) for m in shuffle.SHUFFLES}
        row["ratio"] = row["sort"] / row["index"]
        results["sizes"][n] = row
        print(
            f"n={n}: sort {row['sort']:.1f} us, index {row['index']:.1f} us, "
            f"sort / index {row['ratio']:.1f}",
            flush=True,
        )
    for name in [x for x in args.presets.split(",") if x not in ("", "none")]:
        row = preset_rates(name, args.iterations, args.rounds, args.set)
        results["presets"][name] = row
        print(
            f"{name} (batch {row['batch']}): index {row['index']['sps']:.0f} steps/s, sort "
            f"{row['sort']['sps']:.0f}; index / sort {row['ratio']:.2f} by wall clock, "
            f"{row['cpu_ratio']:.2f} by CPU time",
            flush=True,
        )
    first, last = (int(x) for x in args.seeds.split("-"))
    results["learning"] = {}
    for name in [x for x in args.learning.split(",") if x not in ("", "none")]:
        row = learning(name, list(range(first, last + 1)), args.learning_steps, args.set)
        results["learning"][name] = row
        for method in shuffle.SHUFFLES:
            iqm, mean = row[method]["iqm"], row[method]["mean"]
            finals = ", ".join(f"{v:.1f}" for v in row[method]["final"])
            print(
                f"{name} {method}: IQM {iqm[0]:.1f} [{iqm[1]:.1f}, {iqm[2]:.1f}], mean "
                f"{mean[0]:.1f} [{mean[1]:.1f}, {mean[2]:.1f}]; seeds {finals}",
                flush=True,
            )
    if args.json:
        results = write_json(args.json, results)
    return results


if __name__ == "__main__":
    main()
