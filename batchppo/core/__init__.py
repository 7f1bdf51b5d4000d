"""Pure-JAX core: the functional batched env API, env adapters and the fused simulate loop."""

from batchppo.core.adapters import BraxEnv, GymnaxEnv, HostEnv, make_env
from batchppo.core.env import Env, EnvSpec, StepResult
from batchppo.core.simulate import init_sim_state, rollout, simulate
from batchppo.core.types import EpisodeStats, PolicyFn, SimState, Transition

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
