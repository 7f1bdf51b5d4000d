"""How long BatchEnv's workers spin for their next command: side by side, in one run.

After answering a step a worker spins ``worker_spin_us`` (non-blocking tries, then
``sched_yield``) before it blocks on its semaphore. If the caller's next step comes within
that time, the worker starts it at once; if not, the step waits for the worker's wake-up.
This script measures, for each setting, interleaved over ``--rounds``:

* ``env``: ``BatchEnv.step_arrays`` steps/s of ``--num-envs`` envs of each ``--envs`` id with
  random actions (the parent steps no env), as a fraction of cores x the single-env rate;
* ``train`` (with ``--train-seconds``): end-to-end training steps/s of the ``cheetah_fast``
  preset (in-graph driver, and the host loop), each run in a fresh process, compilation
  excluded. The setting is the run's backend option ``worker_spin_us`` (``--set
  backend_options.worker_spin_us=...``), which the ``process`` backend's workers get.

    python bench/investigations/spin.py --spins 50,1000 --rounds 2 --train-seconds 20
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import gymnasium
import numpy as np

from batchppo.envs import BatchEnv, WorkerOptions


def single_rate(env_id: str, seconds: float) -> float:
    """Steps/s of one env stepped in a loop in this process."""
    env = gymnasium.make(env_id)
    env.reset(seed=0)
    action = env.action_space.sample()
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        _, _, terminated, truncated, _ = env.step(action)
        steps += 1
        if terminated or truncated:
            env.reset()
    env.close()
    return steps / (time.perf_counter() - start)


def batch_rate(env_id: str, num_envs: int, worker_spin_us: float, seconds: float) -> float:
    """Steps/s (summed over the batch) of ``BatchEnv.step_arrays`` with ``copy=False``."""
    with BatchEnv(
        [lambda: gymnasium.make(env_id)] * num_envs,
        WorkerOptions(worker_spin_us=worker_spin_us),
        copy=False,
        autoreset_mode="SameStep",
    ) as env:
        env.reset(seed=0)
        actions = np.stack([env.single_action_space.sample() for _ in range(num_envs)])
        for _ in range(20):
            env.step_arrays(actions)
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            env.step_arrays(actions)
            steps += num_envs
        return steps / (time.perf_counter() - start)


def worker_train(worker_spin_us: float, host_loop: bool, seconds: float) -> dict:
    """Training steps/s of ``cheetah_fast`` with its envs' worker spin set."""
    import dataclasses

    import jax

    from batchppo.algorithms.ppo import Trainer
    from batchppo.algorithms.ppo.presets import PRESETS

    config = PRESETS["cheetah_fast"]
    # The worker spin is a backend option of the process backend: its envs get it.
    spin = {**config.backend_options, "worker_spin_us": worker_spin_us}
    config = dataclasses.replace(config, backend_options=spin)
    if host_loop:
        config = dataclasses.replace(config, host_loop=True)
    trainer = Trainer(config)
    try:
        ts = trainer.init(jax.random.key(0))
        ss = trainer.init_sim(ts, jax.random.key(1))
        ts, ss, _ = trainer.iteration(ts, ss)  # compilation and the first iteration
        first, start = int(ts.step), time.perf_counter()
        while time.perf_counter() - start < seconds:
            ts, ss, _ = trainer.iteration(ts, ss)
        return {"sps": (int(ts.step) - first) / (time.perf_counter() - start)}
    finally:
        trainer.close()


def train_rate(worker_spin_us: float, host_loop: bool, seconds: float) -> float:
    command = [sys.executable, __file__, "_train", str(worker_spin_us), str(int(host_loop))]
    command.append(str(seconds))
    env = dict(os.environ, JAX_PLATFORMS=os.environ.get("JAX_PLATFORMS", "cpu"))
    out = subprocess.run(command, capture_output=True, text=True, env=env, timeout=seconds + 300)
    if out.returncode != 0:
        raise RuntimeError(f"training run failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])["sps"]


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "_train":
        spin, host_loop, seconds = float(sys.argv[2]), sys.argv[3] == "1", float(sys.argv[4])
        print(json.dumps(worker_train(spin, host_loop, seconds)), flush=True)
        return
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--spins", default="50,1000", help="worker_spin_us values to compare")
    parser.add_argument("--envs", default="HalfCheetah-v5,Pendulum-v1", help="env ids")
    parser.add_argument("--num-envs", type=int, default=32, help="envs per BatchEnv")
    parser.add_argument("--seconds", type=float, default=3.0, help="timed seconds per env row")
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds")
    parser.add_argument(
        "--train-seconds", type=float, default=0.0, help="timed training seconds (0: skip)"
    )
    args = parser.parse_args()
    spins = [float(s) for s in args.spins.split(",")]
    cores = len(os.sched_getaffinity(0))
    print(
        f"bench/investigations/spin.py: {cores} cores, {args.num_envs} envs, rounds {args.rounds}",
        flush=True,
    )
    for env_id in args.envs.split(","):
        limit = cores * single_rate(env_id, 2.0)
        for round_ in range(args.rounds):
            for spin in spins:
                rate = batch_rate(env_id, args.num_envs, spin, args.seconds)
                print(
                    f"env   {env_id:16s} round {round_} worker_spin_us {spin:6.0f}: "
                    f"{rate:9.0f} steps/s = {rate / limit:.2f} of the limit "
                    f"(load {os.getloadavg()[0]:.1f})",
                    flush=True,
                )
    if args.train_seconds > 0:
        for round_ in range(args.rounds):
            for host_loop in (False, True):
                for spin in spins:
                    rate = train_rate(spin, host_loop, args.train_seconds)
                    driver = "host loop" if host_loop else "in-graph"
                    print(
                        f"train cheetah_fast {driver:9s} round {round_} worker_spin_us "
                        f"{spin:6.0f}: {rate:7.0f} steps/s (load {os.getloadavg()[0]:.1f})",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
