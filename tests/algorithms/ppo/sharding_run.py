"""Trains a tiny ``pendulum_jax`` with a ``Trainer`` and saves what it computed (a test helper).

Run as a script by ``test_sharding.py`` in a fresh process, since the device count
(``XLA_FLAGS=--xla_force_host_platform_device_count``) and ``jax.distributed`` must be set
before JAX initialises::

    python sharding_run.py OUT.npz DEVICES [COORDINATOR NUM_PROCESSES PROCESS_ID]

``DEVICES`` is the config's ``devices`` (``none`` for None). With a coordinator address the
process first joins a multi-process JAX (CPU collectives over localhost).
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any
from unittest import mock

import numpy as np

TINY = {
    "num_agents": 8,
    "rollout_length": 16,
    "update_epochs": 2,
    "num_minibatches": 2,
    "policy_layers": (16,),
    "value_layers": (16,),
    "max_length": 40,
    "steps": 8 * 16 * 4,
}
"""Overrides of ``pendulum_jax``: 4 iterations of 8 envs x 16 steps, tiny networks."""


def run(devices: int | None) -> dict[str, Any]:
    """Trains 4 iterations (two compiled scans of 2) and evaluates.

    Its training programs compile with the options of the package's run-once programs (as
    the tests' ``cold_training_programs``): they run a few times, and the sharded and the
    unsharded run compile alike.

    Returns:
        Flat arrays: ``metric/<name>`` (one entry per iteration), ``params/<i>`` and
        ``obs_norm/<i>`` (the final state's leaves), ``eval_returns``, and the layout of the
        final sim state's observations (``obs_shards``: the shards' shapes; ``obs_devices``).
    """
    import jax

    from batchppo.algorithms.ppo import Trainer
    from batchppo.algorithms.training import programs
    from batchppo.algorithms.training.episodes import ENDED
    from batchppo.experiment.config.configs import get_preset

    config = dataclasses.replace(get_preset("pendulum_jax"), devices=devices, **TINY)
    with mock.patch.object(programs, "COMPILER_OPTIONS", programs.cold_compiler_options()):
        trainer = Trainer(config)
    try:
        trainer.precompile(iterations=(2,), eval_episodes=4)
        ts = trainer.init(jax.random.key(0))
        ss = trainer.init_sim(ts, jax.random.key(1))
        ts, ss, first = trainer.iterations(ts, ss, 2)
        # A state that comes back on one device (a restored checkpoint) is laid out again.
        ts = jax.device_put(ts, jax.local_devices()[0]) if jax.process_count() == 1 else ts
        ts, ss, rest = trainer.iterations(ts, ss, 2)
        evaluation = trainer.evaluate(ts, 4, jax.random.key(2))
        action = trainer.policy(ts)(np.zeros((3, 3), np.float32))
    finally:
        trainer.close()
    iterations = [*first, *rest]
    out: dict[str, Any] = {
        f"metric/{k}": np.array([m[k] for m in iterations]) for k in first[0] if k != ENDED
    }
    # The episodes each iteration ended, as flat arrays (an npz holds no objects).
    for field in ("step", "score", "length", "terminated", "truncated"):
        out[f"metric/{ENDED}_{field}"] = np.concatenate(
            [getattr(m[ENDED], field) for m in iterations]
        )
    for name, tree in (("params", ts.params), ("obs_norm", ts.obs_norm)):
        for i, leaf in enumerate(jax.tree.leaves(tree)):
            out[f"{name}/{i}"] = np.asarray(leaf)
    out["eval_returns"] = evaluation["returns"]
    out["action"] = action
    out["num_devices"] = np.array(trainer.num_devices)
    out["obs_shards"] = np.array([s.data.shape for s in ss.obs.addressable_shards])
    out["obs_devices"] = np.array(len(ss.obs.sharding.device_set))
    out["params_replicated"] = np.array(
        all(leaf.sharding.is_fully_replicated for leaf in jax.tree.leaves(ts.params))
    )
    return out


def main(argv: list[str]) -> None:
    path, devices = argv[0], argv[1]
    if len(argv) > 2:
        import jax

        coordinator, num_processes, process_id = argv[2], int(argv[3]), int(argv[4])
        jax.distributed.initialize(
            coordinator_address=coordinator, num_processes=num_processes, process_id=process_id
        )
    out = run(None if devices == "none" else int(devices))
    np.savez(path, **out)


if __name__ == "__main__":
    main(sys.argv[1:])
