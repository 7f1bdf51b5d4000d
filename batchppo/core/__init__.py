"""Pure-JAX core: the functional batched env API, the fused simulate loop, returns and
normalisation.

The core imports no backend: the envs that implement its API (gymnax, Brax, Gymnasium envs on the
host) adapt to it from [`batchppo.backends`][batchppo.backends], which also has ``make_env``. The
names below are imported on first use, so that the light modules of the package (the backend
registry ``batchppo.core.backends`` and the registry type ``batchppo.core.registry``, which a
config's validation reads, the range-normalisation rule ``batchppo.core.ranges``, which host
workers use, and the wording of messages ``batchppo.core.wording``, which every layer uses)
can be imported without JAX.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from batchppo._exports import lazy_exports

_LAZY = {
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
    "Env",
    "EnvSpec",
    "EpisodeStats",
    "PolicyFn",
    "SimState",
    "StepResult",
    "Transition",
    "init_sim_state",
    "rollout",
    "simulate",
]

if TYPE_CHECKING:
    from batchppo.core.env import Env, EnvSpec, StepResult
    from batchppo.core.simulation import init_sim_state, rollout, simulate
    from batchppo.core.types import EpisodeStats, PolicyFn, SimState, Transition


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
