"""SB3 vec envs, side by side: BatchVecEnv vs SubprocVecEnv vs DummyVecEnv.

Two rates (env transitions per second, summed over the batch) for each env id and batch size
N, every peer building the same ``gymnasium.make(env_id)`` envs in one run:

* ``env``: ``vec_env.step`` alone, with the same pre-drawn random actions (SB3's contract:
  autoreset, ``terminal_observation``, a list of info dicts). Best of ``--rounds``
  interleaved rounds of ``--seconds`` each.
* ``cpu``: the CPU time per env step of those same rounds, in microseconds, of this process
  and its children (the workers), so each peer's whole cost; the best round. CPU time
  depends far less than wall time on what else runs on the machine. Its ratios are
  ``peer / batch``: how many times the CPU BatchVecEnv spends the peer spends.
* ``ppo``: SB3's ``PPO("MlpPolicy", vec_env, n_steps=--n-steps, seed=0).learn(--ppo-steps)``
  (SB3's defaults otherwise), timed from ``learn``'s start to its end: the rollouts (policy
  and env) and the updates. Best of ``--ppo-rounds`` runs, interleaved.

Peers: ``dummy`` (``DummyVecEnv``: every env in this process), ``subproc``
(``SubprocVecEnv``: one process per env, each step pickled through a pipe), ``batch``
(``batchppo.envs.adapters.sb3.BatchVecEnv``: BatchEnv's shared-memory workers, one per core by
default). The ratios divide ``batch`` by each peer.

    python bench/sb3_vec.py --sizes 8,16 --envs Pendulum-v1,HalfCheetah-v5
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from collections.abc import Callable

import gymnasium
import numpy as np
import torch
from envs import timed_steps  # bench/envs.py: the same stepping loop
from harness import Side, compare
from stable_baselines3 import PPO
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv

from batchppo.envs.adapters.sb3 import BatchVecEnv

PEERS: dict[str, Callable[[list[Callable[[], gymnasium.Env]]], VecEnv]] = {
    "dummy": DummyVecEnv,
    "subproc": SubprocVecEnv,
    "batch": BatchVecEnv,
}


def _env_fns(env_id: str, n: int) -> list[Callable[[], gymnasium.Env]]:
    return [lambda: gymnasium.make(env_id)] * n


def _actions(vec_env: VecEnv, count: int = 64) -> list[np.ndarray]:
    space = vec_env.action_space
    space.seed(0)
    return [np.stack([space.sample() for _ in range(vec_env.num_envs)]) for _ in range(count)]


def env_rate(vec_env: VecEnv, actions: list[np.ndarray], seconds: float) -> dict[str, float]:
    """``env`` (steps/s) and ``cpu`` (CPU us per env step) of ``vec_env.step`` over at least
    ``seconds`` (``bench/envs.py``'s loop)."""
    timing = timed_steps(vec_env.step, actions, vec_env.num_envs, seconds, cpu=True)
    return {"env": timing.rate, "cpu": timing.cpu_us}


def ppo_rate(vec_env: VecEnv, n_steps: int, total: int) -> float:
    """Steps/s of SB3's PPO learning ``total`` steps on ``vec_env`` (seed 0)."""
    model = PPO("MlpPolicy", vec_env, n_steps=n_steps, seed=0, device="cpu")
    start = time.perf_counter()
    model.learn(total_timesteps=total)
    return model.num_timesteps / (time.perf_counter() - start)


def measure(env_id: str, n: int, peers: list[str], args: argparse.Namespace) -> dict[str, dict]:
    """Every peer's ``env`` and ``ppo`` rates for ``env_id`` with ``n`` envs (best of rounds)."""
    built = {peer: PEERS[peer](_env_fns(env_id, n)) for peer in peers}
    try:
        actions = _actions(built[peers[0]])
        for vec_env in built.values():
            vec_env.seed(0)
            vec_env.reset()
        steps = compare(
            [Side(p, lambda _, v=v: env_rate(v, actions, args.seconds)) for p, v in built.items()],
            args.rounds,
        )
        ppo = compare(
            [Side(p, lambda _, v=v: ppo_rate(v, args.n_steps, args.ppo_steps))
             for p, v in built.items()],
            args.ppo_rounds,
        )  # fmt: skip
    finally:
        for vec_env in built.values():
            vec_env.close()
    return {
        peer: {
            "env": steps.best(peer, "env"),
            "cpu": steps.best(peer, "cpu", lower=True),
            "ppo": ppo.best(peer),
        }
        for peer in peers
    }


def main(argv: list[str] | None = None) -> None:
    """Runs the benchmark and prints the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--envs", default="Pendulum-v1,HalfCheetah-v5")
    parser.add_argument("--sizes", default="8,16", help="comma-separated batch sizes")
    parser.add_argument(
        "--peers", default="dummy,subproc,batch", help="subset of " + ",".join(PEERS)
    )
    parser.add_argument("--seconds", type=float, default=2.0, help="timed seconds per env round")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved env rounds (best kept)")
    parser.add_argument("--ppo-steps", type=int, default=4096, help="PPO steps per timed learn")
    parser.add_argument("--n-steps", type=int, default=256, help="PPO's n_steps (per env)")
    parser.add_argument("--ppo-rounds", type=int, default=1, help="timed learns per peer")
    parser.add_argument("--torch-threads", type=int, default=1, help="torch.set_num_threads")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")
    torch.set_num_threads(args.torch_threads)
    peers = args.peers.split(",")
    others = [p for p in peers if p != "batch"]
    print(
        f"cores={os.cpu_count()} torch_threads={args.torch_threads} seconds/round={args.seconds} "
        f"rounds={args.rounds} ppo_steps={args.ppo_steps} n_steps={args.n_steps} "
        f"ppo_rounds={args.ppo_rounds} python={sys.version.split()[0]} (steps/s, best of rounds)"
    )
    print(
        f"{'env':16s} {'N':>3s} {'rate':>4s} "
        + " ".join(f"{p:>9s}" for p in peers)
        + "".join(f" {'batch/' + p:>13s}" for p in others)
    )
    for env_id in args.envs.split(","):
        for n in [int(s) for s in args.sizes.split(",")]:
            rates = measure(env_id, n, peers, args)
            for kind in ("env", "cpu", "ppo"):
                if kind == "cpu":  # lower is better: the ratio is peer / batch
                    cells = " ".join(f"{rates[p][kind]:7.2f}us" for p in peers)
                    ratios = "".join(
                        f" {rates[p][kind] / rates['batch'][kind]:12.2f}x" for p in others
                    )
                else:
                    cells = " ".join(f"{rates[p][kind] / 1e3:8.2f}k" for p in peers)
                    ratios = "".join(
                        f" {rates['batch'][kind] / rates[p][kind]:12.2f}x" for p in others
                    )
                if "batch" not in peers:
                    ratios = ""
                print(
                    f"{env_id:16s} {n:3d} {kind:>4s} {cells}{ratios}"
                    f"  load {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
    print("env = vec_env.step alone (random actions), steps/s; cpu = its CPU us per env step")
    print("(this process and the workers; ratio peer / batch); ppo = SB3 PPO learn (rollouts")
    print("and updates), steps/s. load = 1-min load average after the row (other processes")
    print("competing for the cores distort every figure but cpu's).")


if __name__ == "__main__":
    main()
