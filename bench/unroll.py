"""PPO's update compiled unrolled against as loops (``unroll_update``), side by side.

XLA's CPU backend runs convolution gradients inside a loop (``lax.scan``/``while``) many times
more slowly than outside one (jax-ml/jax issue 12868), so PPO compiles its update's epochs and
minibatch steps unrolled where the network has a CNN torso and JAX runs on the CPU
(``PPOConfig.unroll_update=None``). For each preset this script builds the trainer both ways,
runs one iteration (compiling it), then times ``--iterations`` more, and prints the first
call's seconds, env steps per second and CPU seconds per iteration of each, and their ratio.

Examples:
    python bench/unroll.py                                  # breakout_minatar, 3 iterations
    python bench/unroll.py --presets breakout_atari --iterations 1
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import jax


def measure(preset: str, unroll: bool, iterations: int) -> dict[str, float]:
    """The first call's wall-clock and the timed iterations' rate of ``preset``."""
    from batchppo.algorithms.ppo import Trainer
    from batchppo.experiment.configs import get_preset

    trainer = Trainer(dataclasses.replace(get_preset(preset), unroll_update=unroll))
    try:
        ts = trainer.init(jax.random.key(0))
        ss = trainer.init_sim(ts, jax.random.key(1))
        start = time.perf_counter()
        ts, ss, _ = trainer.iteration(ts, ss)
        jax.block_until_ready(ts)
        first = time.perf_counter() - start
        start, cpu = time.perf_counter(), time.process_time()
        for _ in range(iterations):
            ts, ss, _ = trainer.iteration(ts, ss)
        jax.block_until_ready(ts)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        steps = iterations * trainer.steps_per_iteration
    finally:
        trainer.close()
    return {"first": first, "steps_per_s": steps / seconds, "cpu_per_iteration": cpu / iterations}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--presets", default="breakout_minatar", help="comma-separated")
    parser.add_argument("--iterations", type=int, default=3, help="timed iterations of each")
    args = parser.parse_args()
    print(f"bench/unroll.py: JAX backend {jax.default_backend()}", flush=True)
    for preset in args.presets.split(","):
        results = {unroll: measure(preset, unroll, args.iterations) for unroll in (True, False)}
        for unroll, r in results.items():
            print(
                f"{preset} unroll_update={unroll}: first call {r['first']:.1f} s, "
                f"{r['steps_per_s']:,.0f} env steps/s, CPU {r['cpu_per_iteration']:.1f} s "
                "per iteration",
                flush=True,
            )
        ratio = results[True]["steps_per_s"] / results[False]["steps_per_s"]
        print(f"{preset}: ratio env steps/s unrolled / loops = {ratio:.1f}", flush=True)


if __name__ == "__main__":
    main()
