"""Ray backend against the process backend, side by side: env steps/s and round trips.

Steps per second (env transitions summed over the batch) with random actions, for each env id
at N envs, through ``step_arrays`` (the path ``HostEnv`` uses):

* ``process``: ``batchppo.envs.BatchEnv``, one worker process per core (the default).
* ``ray``: ``batchppo.envs.adapters.ray_env.RayBatchEnv`` with as many actors as ``process`` has
  workers, on a local Ray started here with one CPU per core (or the cluster at
  ``--address``).
* ``ray_1``: ``RayBatchEnv`` with a single actor holding every env (one round trip a step).

The peers step the same ``gymnasium.make(env_id)`` envs with the same pre-drawn actions (the helpers
of ``bench/envs.py``), interleaved over ``--rounds`` rounds with the best kept, so the ratios
hold on a loaded machine. ``calls/step`` is the remote calls one Ray step sends (counted by
``RayBatchEnv.remote_calls``: one per actor); ``us/step`` is the wall time of one batch step;
``empty call`` is the wall time of one call to every actor that steps nothing
(``actor_locations``), the share of a Ray step that is Ray's own.

    python bench/ray_envs.py --seconds 3 --rounds 3 --size 32 --envs Pendulum-v1,HalfCheetah-v5
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

import numpy as np
import ray
from envs import _actions, _env_fn, timed_steps  # bench/envs.py: the same envs, actions, timer
from harness import Side, compare

from batchppo.envs import BatchEnv, RayWorkerOptions, WorkerOptions
from batchppo.envs.adapters.ray_env import RayBatchEnv

PEERS = ("process", "ray", "ray_1")


def _build(peer: str, env_id: str, n: int, workers: int):
    fns = [_env_fn(env_id)] * n
    if peer == "process":
        env = BatchEnv(
            fns, WorkerOptions(num_workers=workers), copy=False, autoreset_mode="SameStep"
        )
    elif peer == "ray":
        env = RayBatchEnv(fns, RayWorkerOptions(num_workers=workers))
    elif peer == "ray_1":
        env = RayBatchEnv(fns, RayWorkerOptions(num_workers=1))
    else:
        raise ValueError(f"unknown peer {peer!r}")
    env.reset(seed=0)
    return env


def _calls_per_step(env: RayBatchEnv, actions: list[np.ndarray], steps: int = 16) -> float:
    """Remote calls ``env`` sends per ``step_arrays`` (its ``remote_calls`` counter)."""
    before = env.remote_calls
    for i in range(steps):
        env.step_arrays(actions[i % len(actions)])
    return (env.remote_calls - before) / steps


def _round_trip_us(env: RayBatchEnv, count: int = 200) -> float:
    """Microseconds of one remote call to every actor with nothing to step (best of 3)."""
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(count):
            env.actor_locations()
        best = min(best, (time.perf_counter() - start) / count * 1e6)
    return best


def measure(env_id: str, n: int, peers: list[str], seconds: float, rounds: int, workers: int):
    """Steps/s of every peer (best of ``rounds`` interleaved rounds), and for the Ray peers
    the remote calls per step and the round trip of an empty call to every actor."""
    built = {p: _build(p, env_id, n, workers) for p in peers}
    calls: dict[str, float] = {}
    trips: dict[str, float] = {}
    try:
        actions = _actions(built[peers[0]].single_action_space, n)
        for peer, env in built.items():
            if isinstance(env, RayBatchEnv):
                calls[peer] = _calls_per_step(env, actions)
                trips[peer] = _round_trip_us(env)
        sides = [
            Side(peer, lambda _, env=env: timed_steps(env.step_arrays, actions, n, seconds).rate)
            for peer, env in built.items()
        ]
        result = compare(sides, rounds)
    finally:
        for env in built.values():
            env.close()
    return {peer: result.best(peer) for peer in peers}, calls, trips


def main(argv: list[str] | None = None) -> None:
    """Runs the benchmark and prints the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--envs", default="Pendulum-v1,HalfCheetah-v5")
    parser.add_argument("--size", type=int, default=32, help="envs per batch")
    parser.add_argument("--seconds", type=float, default=3.0, help="timed seconds per round")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (best kept)")
    parser.add_argument("--peers", default=",".join(PEERS), help=f"subset of {','.join(PEERS)}")
    parser.add_argument("--workers", type=int, default=None, help="default: one per core")
    parser.add_argument("--address", default=None, help="a Ray cluster to join (default: local)")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")
    cores = os.cpu_count() or 1
    workers = args.workers or cores
    peers = args.peers.split(",")
    if args.address:
        ray.init(address=args.address, log_to_driver=False)
    else:
        ray.init(num_cpus=cores, include_dashboard=False, log_to_driver=False)
    print(
        f"cores={cores} workers/actors={workers} seconds/round={args.seconds} "
        f"rounds={args.rounds} ray={ray.__version__} python={sys.version.split()[0]}"
    )
    print(
        f"{'env':16s} {'N':>3s} "
        + " ".join(f"{p:>9s}" for p in peers)
        + "  ray/process  us/step(process, ray)  calls/step(ray)  empty call us(ray)"
    )
    try:
        for env_id in args.envs.split(","):
            rates, calls, trips = measure(
                env_id, args.size, peers, args.seconds, args.rounds, workers
            )
            cells = " ".join(f"{rates[p] / 1e3:8.1f}k" for p in peers)
            ratio = rates.get("ray", 0) / rates["process"] if "process" in rates else 0.0
            us = [f"{args.size / rates[p] * 1e6:.0f}" for p in ("process", "ray") if p in rates]
            print(
                f"{env_id:16s} {args.size:3d} {cells} {ratio:11.2f}x  {', '.join(us):>20s}  "
                + ", ".join(f"{p}: {c:g}" for p, c in calls.items())
                + "  "
                + ", ".join(f"{p}: {t:.0f}" for p, t in trips.items())
                + f"  load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
    finally:
        ray.shutdown()
    print("steps/s through step_arrays, best of rounds; calls/step: remote calls per batch step")
    print("(one per actor); empty call: a call to every actor with nothing to step, the part of")
    print("a Ray step that is Ray's. load = 1-min load average after the row.")


if __name__ == "__main__":
    main()
