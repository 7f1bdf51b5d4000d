r"""A compile setting of the training programs on and off, side by side: ``unroll_update`` or
``xla_convolutions``.

Both settings exist for CNN torsos on the CPU, and both are on there by default (None):

* ``unroll_update`` (PPO): XLA's CPU backend runs convolution gradients inside a loop
  (``lax.scan``/``while``) many times more slowly than outside one (jax-ml/jax issue 12868), so
  PPO compiles its update's epochs and minibatch steps unrolled.
* ``xla_convolutions`` (every algorithm): the XLA of jaxlib 0.10 hands large convolutions to
  the YNNPACK library by default, whose gradient convolutions ran far more slowly than XLA's
  own; the hot programs then keep convolutions on XLA's kernels.

For each preset this script builds the trainer with the setting on and off, runs one
iteration (compiling it), then times ``--iterations`` more, and prints the first call's
seconds, env steps per second and CPU seconds per iteration of each, and their ratio.
``--rounds`` repeats the pair, alternating which side goes first.

Examples:
    python bench/investigations/settings.py             # unroll_update, breakout_minatar
    python bench/investigations/settings.py --setting xla_convolutions \
        --presets breakout_minatar,breakout_atari
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import jax

SETTINGS = ("unroll_update", "xla_convolutions")


def measure(preset: str, setting: str, on: bool, iterations: int) -> dict[str, float]:
    """The first call's wall-clock and the timed iterations' rate of ``preset`` with
    ``setting`` on or off."""
    from batchppo.algorithms.ppo import Trainer
    from batchppo.experiment.config.configs import get_preset

    trainer = Trainer(dataclasses.replace(get_preset(preset), **{setting: on}))
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
    parser.add_argument("--setting", choices=SETTINGS, default="unroll_update")
    parser.add_argument("--presets", default="breakout_minatar", help="comma-separated")
    parser.add_argument("--iterations", type=int, default=3, help="timed iterations of each")
    parser.add_argument("--rounds", type=int, default=1, help="pairs, alternating the order")
    args = parser.parse_args()
    print(f"bench/investigations/settings.py: JAX backend {jax.default_backend()}", flush=True)
    for preset in args.presets.split(","):
        rates: dict[bool, list[float]] = {True: [], False: []}
        for k in range(args.rounds):
            for on in (True, False) if k % 2 == 0 else (False, True):
                r = measure(preset, args.setting, on, args.iterations)
                rates[on].append(r["steps_per_s"])
                print(
                    f"{preset} {args.setting}={on}: first call {r['first']:.1f} s, "
                    f"{r['steps_per_s']:,.0f} env steps/s, CPU {r['cpu_per_iteration']:.1f} s "
                    "per iteration",
                    flush=True,
                )
        ratio = max(rates[True]) / max(rates[False])
        print(
            f"{preset}: ratio of the best env steps/s, {args.setting} on / off = {ratio:.2f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
