"""The slowest batch step and reset of the MuJoCo presets' envs: what the ``process``
backend's ``step_timeout`` (``backend_options.step_timeout``) must stay far above.

For each preset, its envs are built as training builds them (``batchppo.envs.make`` with the
preset's ``num_agents`` and ``num_workers``), reset, stepped ``--steps`` times with random
actions and reset 5 times more; prints the mean and slowest step and the slowest reset.

Example:
    python bench/step_times.py                 # reacher cheetah walker hopper ant humanoid
    python bench/step_times.py ant --steps 500
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from batchppo.envs import WorkerOptions, make
from batchppo.experiment.config import configs

PRESETS = ("reacher", "cheetah", "walker", "hopper", "ant", "humanoid")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("presets", nargs="*", default=PRESETS)
    parser.add_argument("--steps", type=int, default=2000, help="steps per preset")
    args = parser.parse_args()
    for name in args.presets:
        config = configs.get_preset(name)
        env = make(
            config.env, config.num_agents,
            options=WorkerOptions(num_workers=config.backend_options.get("num_workers")),
            max_length=config.max_length, **config.env_kwargs,
        )  # fmt: skip
        start = time.perf_counter()
        env.reset(seed=0)
        first_reset = time.perf_counter() - start
        rng = np.random.default_rng(0)
        times = []
        for _ in range(args.steps):
            action = rng.uniform(-1, 1, env.action_space.shape).astype(np.float32)
            start = time.perf_counter()
            env.step_arrays(action)
            times.append(time.perf_counter() - start)
        resets = []
        for seed in range(5):
            start = time.perf_counter()
            env.reset(seed=seed)
            resets.append(time.perf_counter() - start)
        env.close()
        print(
            f"{name}: {config.env}, {config.num_agents} envs: step mean "
            f"{1e3 * np.mean(times):.2f} ms, slowest {1e3 * max(times):.1f} ms; reset first "
            f"{1e3 * first_reset:.1f} ms, slowest of 5 more {1e3 * max(resets):.1f} ms",
            flush=True,
        )


if __name__ == "__main__":
    main()
