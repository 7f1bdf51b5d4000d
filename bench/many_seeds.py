"""Seeds in one program against separate runs one after another; prints steps/s and ratios.

For each preset, ``N`` seeds (default 8) train for ``--steps`` env steps each, twice:

* *one program*: ``batchppo.train(preset, seeds=N)`` (pure-JAX presets: the iteration
  vmapped over seeds; host presets: one batch env of ``N x num_agents`` envs shared by the
  seeds and the learner vmapped over them);
* *separate*: ``batchppo.train(preset)`` for seeds ``0 .. N-1``, one after another, in this
  process (each run builds its envs and compiles its programs, as separate runs do).

Evaluation is off (``eval_episodes=0``); nothing is written to disk. Two figures per side:
end to end (all seeds' env steps over the wall-clock of the whole call, start-up and
compilation included) and steady state (the train reports' steps/s, which leave out each
run's first, compiling, iteration; summed over the seeds trained at once).

Example:
    python bench/many_seeds.py                                      # pendulum_jax and cheetah_fast
    python bench/many_seeds.py --presets pendulum_jax --steps 20480 --seeds 4
"""

from __future__ import annotations

import argparse
import statistics
import time

from harness import Side, compare

DEFAULT_STEPS = {"pendulum_jax": 20_480, "cheetah_fast": 8_192}


def _steady_sps(records: list[dict]) -> float:
    """Median steps/s of a run's train reports."""
    return statistics.median(r["sps"] for r in records if r["phase"] == "train" and r["sps"])


def bench(preset: str, num_seeds: int, steps: int) -> dict[str, float]:
    """Both ways of training ``num_seeds`` seeds of ``preset`` (``harness.compare``, one round);
    their figures."""
    import batchppo

    overrides = [f"steps={steps}", "eval_episodes=0", "log_every=1"]

    def together(_: int) -> dict[str, float]:
        start = time.perf_counter()
        results = batchppo.train(preset, overrides=overrides, progress="none", seeds=num_seeds)
        seconds = time.perf_counter() - start
        # All seeds advance in each iteration: the seeds' steps/s add up.
        steady = sum(_steady_sps(r.records) for r in results)
        return {"e2e": sum(r.step for r in results) / seconds, "steady": steady, "s": seconds}

    def alone(_: int) -> dict[str, float]:
        start, done, sps = time.perf_counter(), 0, []
        for seed in range(num_seeds):
            result = batchppo.train(preset, overrides=[*overrides, f"seed={seed}"], progress="none")
            done += result.step
            sps.append(_steady_sps(result.records))
        seconds = time.perf_counter() - start
        return {"e2e": done / seconds, "steady": statistics.mean(sps), "s": seconds}

    result = compare([Side("together", together), Side("alone", alone)], rounds=1)
    return {
        f"{side}_{key}": result.values(side, key)[0]
        for side in result.names
        for key in ("e2e", "steady", "s")
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", nargs="+", default=list(DEFAULT_STEPS))
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--steps", type=int, help="env steps per seed (default per preset)")
    args = parser.parse_args()
    print(
        f"{'preset':<14} {'seeds':>5} {'steps/seed':>10} | {'one program':>11} "
        f"{'separate':>9} {'ratio':>6} (end to end, steps/s) | {'one program':>11} "
        f"{'separate':>9} {'ratio':>6} (steady state)"
    )
    for preset in args.presets:
        steps = args.steps or DEFAULT_STEPS.get(preset, 20_480)
        r = bench(preset, args.seeds, steps)
        print(
            f"{preset:<14} {args.seeds:>5} {steps:>10,} | {r['together_e2e']:>11,.0f} "
            f"{r['alone_e2e']:>9,.0f} {r['together_e2e'] / r['alone_e2e']:>5.2f}x"
            f"{'':>22} | {r['together_steady']:>11,.0f} {r['alone_steady']:>9,.0f} "
            f"{r['together_steady'] / r['alone_steady']:>5.2f}x   "
            f"({r['together_s']:.0f} s against {r['alone_s']:.0f} s)",
            flush=True,
        )


if __name__ == "__main__":
    main()
