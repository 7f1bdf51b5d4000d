"""A learner on every device: the training iteration data-parallel over a 1-D device mesh.

With several JAX devices (GPUs, TPU cores, or CPU devices forced with
``XLA_FLAGS=--xla_force_host_platform_device_count=N``) and a pure-JAX backend, the
[`Trainer`][batchppo.algorithms.training.trainer.Trainer] compiles its programs over a 1-D
``jax.sharding.Mesh`` with the axis ``"data"``:

* the env batch is sharded: every [`SimState`][batchppo.core.SimState] leaf with a leading
  ``num_agents`` axis (env states, observations, episode counters, the policy carry), ``num_agents /
  devices`` envs per device, and so the rollout inside the iteration;
* the train state (parameters, optimiser state, normaliser statistics, KL beta, learner key,
  counters, and the per-env running return, ``num_agents`` floats) is replicated, so every
  process holds all of it and can checkpoint it.

The program is the single-device one: under GSPMD, every mean over the batch (the loss and so
the gradients, the normaliser updates, the metrics) becomes a reduction across the devices, and
the minibatch permutation a gather across them. One constraint is added
(``PPO.minibatch_sharding``): each epoch's shuffled minibatches are split over the devices
again, so that the update, not only the rollout, is data-parallel. So a sharded run computes
what the unsharded run computes, up to the order of floating-point sums
(``tests/algorithms/ppo/test_sharding.py``).

On one device (the default on a machine with one) no mesh is built and the programs are exactly the
unsharded ones. Several processes (hosts) form one mesh over all their devices when
``jax.distributed.initialize`` ran first (see docs/scale_out.md, "Devices").
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from batchppo.backends import get_backend, names

AXIS = "data"
"""Name of the mesh axis the env batch is sharded over."""

PyTree = Any


def learner_devices(config: Any) -> list[jax.Device]:
    """The devices the learner of ``config`` runs on, checked against the config.

    ``config.devices`` None takes every device (``jax.devices()``: all local devices, and those of
    the other processes after ``jax.distributed.initialize``) for pure-JAX backends, and one device
    for host backends (their envs step on the host through ``io_callback``; that path stays on one
    device).

    Raises:
        ValueError: in one line, when more devices are asked for than exist, when a host
            backend is asked for several, or when ``num_agents`` does not split evenly over
            the devices.
    """
    available = jax.devices()
    requested = config.devices
    if not get_backend(config.backend).fused:
        if requested not in (None, 1):
            raise ValueError(
                f"devices={requested}: backend={config.backend!r} steps its envs on the host "
                "and its learner runs on one device; set devices=1 (or None), or use a "
                f"pure-JAX backend ({', '.join(names(host=False))})"
            )
        return available[:1]
    count = len(available) if requested is None else requested
    if count > len(available):
        raise ValueError(
            f"devices={requested}: only {len(available)} JAX devices "
            f"({available[0].platform}) exist; set devices to at most {len(available)}"
        )
    if config.num_agents % count:
        raise ValueError(
            f"num_agents={config.num_agents} does not split over {count} devices: set "
            f"num_agents to a multiple of {count}, or devices to a divisor of "
            f"{config.num_agents} (devices=1 runs unsharded)"
        )
    return available[:count]


class Sharding:
    """The shardings of the learner's states over a 1-D mesh of ``devices``.

    Args:
        devices: The mesh's devices (two or more).
        num_envs: The env batch (``num_agents``) that is sharded.
    """

    def __init__(self, devices: list[jax.Device], num_envs: int) -> None:
        self.mesh = Mesh(np.asarray(devices), (AXIS,))
        self.num_envs = num_envs
        self.replicated = NamedSharding(self.mesh, PartitionSpec())
        self.batch = NamedSharding(self.mesh, PartitionSpec(AXIS))
        # Shuffled minibatches (M, sequences / M, ...): each device takes a share of every one.
        self.minibatches = NamedSharding(self.mesh, PartitionSpec(None, AXIS))

    @property
    def num_devices(self) -> int:
        """Devices of the mesh."""
        return int(self.mesh.devices.size)

    def _leaf(self, x: Any) -> NamedSharding:
        shape = getattr(x, "shape", ())
        return self.batch if len(shape) >= 1 and shape[0] == self.num_envs else self.replicated

    def train_state(self, ts: PyTree) -> PyTree:
        """Shardings of a ``TrainState`` (arrays or shapes): all replicated."""
        return jax.tree.map(lambda _: self.replicated, ts)

    def sim_state(self, ss: PyTree) -> PyTree:
        """Shardings of a ``SimState``: leaves with a leading env axis sharded, the PRNG key
        (and any other leaf) replicated."""
        shardings = jax.tree.map(self._leaf, ss)
        return shardings.replace(key=jax.tree.map(lambda _: self.replicated, ss.key))

    def put(self, tree: PyTree, shardings: PyTree) -> PyTree:
        """``tree`` placed with ``shardings`` (no copy where a leaf is already there)."""
        return jax.device_put(tree, shardings)
