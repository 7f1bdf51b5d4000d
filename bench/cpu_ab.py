r"""A/B of two checkouts by CPU time: CPU seconds per 1k env steps of the same workloads on each.

Wall-clock on a shared machine swings with whatever else runs there; the CPU time a process
and its workers spend on a fixed amount of work swings far less, so a refactor that only moves
code (same programs, same env stepping) should show ratios near 1 here even where
``versions.py``'s rates do not settle. Every measurement is a fresh interpreter with
``PYTHONPATH`` set to one checkout (its ``batchppo.__file__`` is checked to lie in it), run from
a scratch directory so that no other checkout is importable; the checkouts alternate within a
round and the order is reversed every other round (``harness.compare``).

Workloads (``--workloads``), each counted in env steps (transitions):

* ``host``: ``batchppo.envs.make("Pendulum-v1", E)`` in ``W`` worker processes, stepped with
  ``step_arrays`` and pre-drawn random actions; the CPU of the caller and of every descendant
  process (``harness.cpu_seconds``) over the timed steps, after untimed warm-up steps. The
  workers and the caller do not spin while waiting (``spin_us=0``, ``worker_spin_us=0``):
  spinning burns CPU for as long as the other side takes, which measures the load, not the
  code.
* ``fused``: ``jit(rollout)`` over ``GymnaxEnv("Pendulum-v1", N)`` with a small MLP policy
  (``bench/simulate.py``'s fused path); the CPU of the process over the calls after the two
  that compile. Its ``process_cpu_s`` and the host workload's are the whole process's (import
  and compilation included; not the host workers, which the forkserver starts and waits for).
* ``train``: ``python -m batchppo train --config pendulum_jax --set steps=S`` into a scratch
  logdir; the CPU of the whole process and of what it waited for (imports and compilation
  included), from this process's ``RUSAGE_CHILDREN``. JAX's persistent compilation cache is
  off (``BATCHPPO_COMPILATION_CACHE=0``): every run compiles, as a first run of a config does,
  and none reads what another run (or another checkout) wrote.

XLA runs single-threaded (``--xla-threads`` keeps its own thread pool): idle pool threads that
spin before sleeping would add CPU time that depends on the other load.

    python bench/cpu_ab.py BEFORE_CHECKOUT AFTER_CHECKOUT --rounds 6 --json /tmp/cpu_ab.json

(``git worktree add --detach /tmp/before REV`` makes a checkout of a revision.)

Each row printed is one run; the summary gives, per workload, each side's CPU seconds per 1k
steps round by round, the median of the per-round ratios after/before and their range.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness import Result, Side, compare, cpu_seconds, json_line, write_json

WORKLOADS = ("host", "fused", "train")
SINGLE_THREAD_XLA = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
KEY = "cpu_per_1k"
"""The figure compared: CPU seconds per 1000 env steps."""


def host_worker(args: argparse.Namespace) -> dict[str, Any]:
    """Steps a process ``BatchEnv`` of Pendulum-v1 envs; the CPU of this process and its
    workers over the timed steps."""
    import numpy as np

    from batchppo.envs import WorkerOptions, make

    options = WorkerOptions(num_workers=args.workers, spin_us=0, worker_spin_us=0)
    env = make("Pendulum-v1", args.envs, seed=0, options=options)
    try:
        rng = np.random.default_rng(0)
        actions = rng.uniform(-1, 1, (256, args.envs, 1)).astype(np.float32)
        for i in range(args.warmup):
            env.step_arrays(actions[i % len(actions)])
        start_cpu, start = cpu_seconds(), time.perf_counter()
        for i in range(args.steps):
            env.step_arrays(actions[i % len(actions)])
        cpu, wall = cpu_seconds() - start_cpu, time.perf_counter() - start
    finally:
        env.close()
    return {"cpu_s": cpu, "wall_s": wall, "env_steps": args.steps * args.envs}


def fused_worker(args: argparse.Namespace) -> dict[str, Any]:
    """Calls ``jit(rollout)`` over ``GymnaxEnv``; the CPU of this process over the calls after
    the two that compile (the second compiles for the state the first returned)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from batchppo.backends import GymnaxEnv
    from batchppo.core.simulation import init_sim_state, rollout

    sizes = [3, 64, 64, 1]
    keys = jax.random.split(jax.random.key(1), len(sizes) - 1)
    params = [
        (jax.random.normal(k, (a, b)) / np.sqrt(a), jnp.zeros(b))
        for k, a, b in zip(keys, sizes[:-1], sizes[1:], strict=True)
    ]

    def policy(params, carry, obs, first, key):
        x = obs
        for w, b in params[:-1]:
            x = jnp.tanh(x @ w + b)
        w, b = params[-1]
        mean = x @ w + b
        return mean + 0.3 * jax.random.normal(key, mean.shape), {}, carry

    env = GymnaxEnv("Pendulum-v1", args.envs)
    run = jax.jit(rollout, static_argnums=(0, 1, 4))
    state = init_sim_state(env, (), jax.random.key(0))

    def once():
        nonlocal state
        state, traj, _ = run(env, policy, params, state, args.rollout)
        jax.block_until_ready(traj.reward)

    for _ in range(2):
        once()
    start_cpu, start = time.process_time(), time.perf_counter()
    for _ in range(args.calls):
        once()
    cpu, wall = time.process_time() - start_cpu, time.perf_counter() - start
    return {"cpu_s": cpu, "wall_s": wall, "env_steps": args.calls * args.rollout * args.envs}


def worker(args: argparse.Namespace) -> None:
    """Runs one workload in this process and prints its figures as a JSON line."""
    import batchppo

    figures = {"host": host_worker, "fused": fused_worker}[args.worker](args)
    print(json.dumps({**figures, "file": batchppo.__file__}), flush=True)


def child_cpu() -> float:
    """CPU seconds (user + system) of this process's children that have been waited for."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_child(command: list[str], tree: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Runs ``command`` in a scratch directory with ``tree`` alone on ``PYTHONPATH``; its
    output, wall-clock and CPU seconds (it and what it waited for)."""
    env = {**os.environ, "PYTHONPATH": str(tree), "JAX_PLATFORMS": "cpu",
           "BATCHPPO_COMPILATION_CACHE": "0"}  # fmt: skip
    if not args.xla_threads:
        env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} {SINGLE_THREAD_XLA}".strip()
    with tempfile.TemporaryDirectory(prefix="cpu_ab-") as scratch:
        cmd = [part.replace("{scratch}", scratch) for part in command]
        start_cpu, start = child_cpu(), time.perf_counter()
        done = subprocess.run(cmd, cwd=scratch, env=env, capture_output=True, text=True,
                              timeout=args.timeout)  # fmt: skip
        wall, cpu = time.perf_counter() - start, child_cpu() - start_cpu
    if done.returncode != 0:
        tail = " | ".join(done.stderr.strip().splitlines()[-5:])
        raise SystemExit(f"cpu_ab: {' '.join(cmd)} exited {done.returncode}: {tail}")
    return {"stdout": done.stdout, "wall_s": wall, "cpu_s": cpu}


def measure(workload: str, tree: Path, args: argparse.Namespace) -> dict[str, Any]:
    """One run of ``workload`` on ``tree``: its CPU seconds per 1k env steps (``KEY``), the
    process's whole CPU (``process_cpu_s``) and wall-clock."""
    if workload == "train":
        cmd = [sys.executable, "-m", "batchppo", "train", "--config", "pendulum_jax",
               "--set", f"steps={args.train_steps}", "--logdir", "{scratch}/runs",
               "--progress", "none"]  # fmt: skip
        done = run_child(cmd, tree, args)
        check = [sys.executable, "-c", "import batchppo; print(batchppo.__file__)"]
        file = run_child(check, tree, args)["stdout"].strip()
        figures = {"cpu_s": done["cpu_s"], "wall_s": done["wall_s"], "file": file}
        figures["env_steps"] = args.train_steps
    else:
        sizes = {
            "host": ["--envs", str(args.host_envs), "--steps", str(args.host_steps)],
            "fused": ["--envs", str(args.fused_envs), "--calls", str(args.fused_calls)],
        }
        cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", workload,
               "--workers", str(args.workers), *sizes[workload]]  # fmt: skip
        done = run_child(cmd, tree, args)
        figures = json_line(done["stdout"]) or {}
        figures["process_cpu_s"] = done["cpu_s"]
    if not Path(figures.get("file", "")).resolve().is_relative_to(tree.resolve()):
        raise SystemExit(
            f"cpu_ab: {workload} imported batchppo from {figures.get('file')}, not from {tree}; "
            "give a checkout whose batchppo/ is importable"
        )
    figures[KEY] = figures["cpu_s"] / figures["env_steps"] * 1000
    return figures


def summary(result: Result) -> dict[str, Any]:
    """One workload's ``KEY`` per round on both sides, the ratios after/before round by round
    (the two ran back to back), their median and their range (``spread``: the noise)."""
    ratios = result.round_ratios("after", "before", KEY)
    return {
        "before": result.values("before", KEY),
        "after": result.values("after", KEY),
        "ratios": ratios,
        "median_ratio": statistics.median(ratios),
        "spread": [min(ratios), max(ratios)],
    }


def parse(argv: list[str] | None) -> argparse.Namespace:
    """The command line (the bench's, or with ``--worker`` a worker's)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("before", nargs="?", type=Path, help="the checkout measured as before")
    parser.add_argument("after", nargs="?", type=Path, help="the checkout measured as after")
    parser.add_argument("--rounds", type=int, default=6, help="runs of each side per workload")
    parser.add_argument("--warmup-rounds", type=int, default=1,
                        help="untimed rounds first (bytecode caches, page cache)")  # fmt: skip
    parser.add_argument("--workloads", default=",".join(WORKLOADS), help="comma-separated")
    parser.add_argument("--workers", type=int, default=2, help="host: worker processes")
    parser.add_argument("--host-envs", type=int, default=8)
    parser.add_argument("--host-steps", type=int, default=20_000, help="host: timed batch steps")
    parser.add_argument("--fused-envs", type=int, default=256)
    parser.add_argument("--fused-calls", type=int, default=100, help="fused: timed rollouts")
    parser.add_argument("--train-steps", type=int, default=100_000)
    parser.add_argument("--xla-threads", action="store_true", help="keep XLA's thread pool")
    parser.add_argument("--timeout", type=float, default=300.0, help="per run (s)")
    parser.add_argument("--json", help="write the rows and the summary here")
    parser.add_argument("--worker", choices=["host", "fused"], help=argparse.SUPPRESS)
    parser.add_argument("--envs", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--steps", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--calls", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--warmup", type=int, default=200, help=argparse.SUPPRESS)
    parser.add_argument("--rollout", type=int, default=200, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not args.worker and (args.before is None or args.after is None):
        parser.error("give the two checkouts: BEFORE AFTER")
    unknown = set(args.workloads.split(",")) - set(WORKLOADS)
    if unknown:
        parser.error(f"--workloads: unknown {sorted(unknown)}; use {', '.join(WORKLOADS)}")
    return args


def main(argv: list[str] | None = None) -> None:
    """Runs every workload on both checkouts, round by round, and prints and writes the
    summary (or, with ``--worker``, one workload in this process)."""
    args = parse(argv)
    if args.worker:
        worker(args)
        return
    workloads = args.workloads.split(",")
    trees = {"before": args.before, "after": args.after}
    results: dict[str, Result] = {w: Result(list(trees), []) for w in workloads}

    def side(name: str) -> Side:
        def run(round_: int) -> dict[str, Any]:
            return {w: measure(w, trees[name], args) for w in workloads}

        return Side(name, run)

    def show(row: dict[str, Any], _: Result) -> None:
        for w in workloads:
            results[w].rows.append({**row[w], "side": row["side"], "round": row["round"]})
            print(f"round {row['round']} {row['side']:>6} {w:>5}: {row[w][KEY]:.4g} CPU s/1k "
                  f"steps ({row[w]['cpu_s']:.2f} s CPU, {row[w]['wall_s']:.2f} s wall)",
                  flush=True)  # fmt: skip

    compare([side(name) for name in trees], args.rounds, args.warmup_rounds, on_row=show)
    found = {w: summary(results[w]) for w in workloads}
    print(f"\nCPU s per 1k env steps; before = {args.before}, after = {args.after}")
    for w, s in found.items():
        lo, hi = s["spread"]
        print(f"{w:>5}: before {' '.join(f'{v:.4g}' for v in s['before'])}")
        print(f"{'':>5}  after  {' '.join(f'{v:.4g}' for v in s['after'])}")
        print(f"{'':>5}  ratio after/before: median {s['median_ratio']:.3f}, "
              f"rounds {lo:.3f}-{hi:.3f}")  # fmt: skip
    if args.json:
        rows = {w: r.rows for w, r in results.items()}
        write_json(args.json, {"summary": found, "rows": rows})


if __name__ == "__main__":
    main()
