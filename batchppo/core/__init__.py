"""Pure-JAX core: the functional batched env API, env adapters and the fused simulate loop.

The names below are imported on first use, so that the light modules of the package (the
backend registry :mod:`batchppo.core.backends`, which a config's validation reads) can be
imported without JAX.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from batchppo._exports import lazy_exports

_LAZY = {
    "BraxEnv": "batchppo.core.adapters",
    "GymnaxEnv": "batchppo.core.adapters",
    "HostEnv": "batchppo.core.adapters",
    "make_env": "batchppo.core.adapters",
    "Env": "batchppo.core.env",
    "EnvSpec": "batchppo.core.env",
    "StepResult": "batchppo.core.env",
    "init_sim_state": "batchppo.core.simulation",
    "rollout": "batchppo.core.simulation",
    "simulate": "batchppo.core.simulation",
    "EpisodeStats": "batchppo.core.types",
    "PolicyFn": "batchppo.core.types",
    "SimState": "batchppo.core.types",
    "Transition": "batchppo.core.types",
}

__all__ = [
    "BraxEnv",
    "Env",
    "EnvSpec",
    "EpisodeStats",
    "GymnaxEnv",
    "HostEnv",
    "PolicyFn",
    "SimState",
    "StepResult",
    "Transition",
    "init_sim_state",
    "make_env",
    "rollout",
    "simulate",
]

if TYPE_CHECKING:
    from batchppo.core.adapters import BraxEnv, GymnaxEnv, HostEnv, make_env
    from batchppo.core.env import Env, EnvSpec, StepResult
    from batchppo.core.simulation import init_sim_state, rollout, simulate
    from batchppo.core.types import EpisodeStats, PolicyFn, SimState, Transition


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)

