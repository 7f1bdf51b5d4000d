"""What stepping N envs in lockstep costs against one env's step (issue 41, item 4).

A batch env that waits for all of its envs at every step (``BatchEnv``, Gymnasium's vector
envs, and so every rollout that acts on the whole batch at once) takes, per batch step, the
slowest of its N envs' steps: an env that restarts its episode in that step (Atari: a lost life
or a game over, with its no-ops and FIRE) holds the other N - 1 waiting. This script measures
one env's step times, restarts included (``make(env_id, 1, backend="sync")``: the training
stack, its same-step autoreset inside the step), then:

* ``one``: the mean step of one env, and its agent steps/s (``1 / mean``);
* ``lockstep``: the mean over many drawn batch steps of the slowest of N step times drawn from
  those measured (the envs independent), i.e. a batch step on N cores with no overhead at all;
  its agent steps/s (``N / that``) and ``efficiency`` = ``one``'s mean over it (the share of
  N x one env's rate that lockstep keeps);
* ``no_restarts``: the same without the steps that restarted an episode (what lockstep would
  keep if restarts cost a plain step).

    python bench/lockstep.py --env ALE/Breakout-v5 --preprocess atari --sizes 8,16 --steps 4000
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np
from harness import write_json

from batchppo.envs import make


def step_times(env_id: str, steps: int, preprocess: str | None, seed: int = 0) -> dict[str, Any]:
    """One env's step times in seconds (random actions) and which steps restarted an episode."""
    env = make(env_id, 1, backend="sync", seed=seed, preprocess=preprocess)
    try:
        env.reset(seed=seed)
        env.action_space.seed(seed)
        times, restarted = np.empty(steps), np.zeros(steps, np.bool_)
        for i in range(steps):
            action = env.action_space.sample()
            start = time.perf_counter()
            _, _, terminated, truncated, _ = env.step_arrays(action)
            times[i] = time.perf_counter() - start
            restarted[i] = bool(terminated[0] or truncated[0])
    finally:
        env.close()
    return {"times": times, "restarted": restarted}


def lockstep(times: np.ndarray, size: int, draws: int, rng: np.random.Generator) -> float:
    """Mean over ``draws`` batch steps of the slowest of ``size`` times drawn from ``times``."""
    return float(rng.choice(times, size=(draws, size)).max(axis=1).mean())


def summary(measured: dict[str, Any], sizes: list[int], draws: int = 20_000) -> dict[str, Any]:
    """The figures of the module doc, in milliseconds and agent steps/s."""
    times, restarted = measured["times"], measured["restarted"]
    rng = np.random.default_rng(0)
    one = float(times.mean())
    plain = times[~restarted]
    out: dict[str, Any] = {
        "steps": int(times.size),
        "restarts": int(restarted.sum()),
        "one_ms": one * 1e3,
        "one_sps": 1 / one,
        "restart_ms": float(times[restarted].mean() * 1e3) if restarted.any() else None,
        "plain_ms": float(plain.mean() * 1e3),
        "sizes": {},
    }
    for n in sizes:
        both = lockstep(times, n, draws, rng)
        no_restarts = lockstep(plain, n, draws, rng)
        out["sizes"][str(n)] = {
            "lockstep_ms": both * 1e3,
            "lockstep_sps": n / both,
            "efficiency": one / both,
            "no_restarts_ms": no_restarts * 1e3,
            "no_restarts_sps": n / no_restarts,
        }
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="ALE/Breakout-v5")
    parser.add_argument("--preprocess", default="atari", help="make()'s preprocess; none: none")
    parser.add_argument("--sizes", default="8,16", help="comma-separated batch sizes")
    parser.add_argument("--steps", type=int, default=4000, help="steps of the one env timed")
    parser.add_argument("--json", help="write the summary here")
    args = parser.parse_args(argv)
    preprocess = None if args.preprocess == "none" else args.preprocess
    sizes = [int(s) for s in args.sizes.split(",")]
    out = {"env": args.env, "preprocess": preprocess}
    out.update(summary(step_times(args.env, args.steps, preprocess), sizes))
    print(
        f"{args.env}: one env {out['one_ms']:.3f} ms a step ({out['one_sps']:,.0f} steps/s); "
        f"{out['restarts']} restarts in {out['steps']} steps, {out['restart_ms'] or 0:.2f} ms "
        f"each against {out['plain_ms']:.3f}"
    )
    for n, row in out["sizes"].items():
        print(
            f"  {n:>3} envs in lockstep: {row['lockstep_ms']:.3f} ms a batch step, "
            f"{row['lockstep_sps']:,.0f} agent steps/s = {row['efficiency']:.2f} of {n} x one env; "
            f"without restarts {row['no_restarts_sps']:,.0f}"
        )
    if args.json:
        return write_json(args.json, out)
    return out


if __name__ == "__main__":
    main()
